"""The data directory is the owner's alone: created 0700 with its broker, runs, logs and results
folders, and an existing one that other users can read is tightened at start, with a log line."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.settings import Settings

LAYOUT = ("", "broker", "broker/in", "broker/processed", "runs", "logs", "results")


@pytest.fixture
def common_umask() -> Iterator[None]:
    """The usual umask 022, under which a plain mkdir gives 0755 (readable by everyone)."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_directory_is_owner_only(tmp_path: Path, common_umask: None) -> None:
    home = tmp_path / "parent" / "home"
    Settings(home=home).ensure_dirs()
    assert {name: oct(_mode(home / name)) for name in LAYOUT} == {name: "0o700" for name in LAYOUT}


def test_a_readable_data_directory_is_tightened_with_a_log_line(
    tmp_path: Path, common_umask: None, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    for name in ("", "runs", "broker"):
        (home / name).mkdir(mode=0o755, exist_ok=True)
    os.chmod(home, 0o755)
    (home / "cooplab.db").write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        Settings(home=home).ensure_dirs()
    assert {name: oct(_mode(home / name)) for name in LAYOUT} == {name: "0o700" for name in LAYOUT}
    lines = [r.getMessage() for r in caplog.records if "readable by other users" in r.getMessage()]
    assert len(lines) == 1 and str(home) in lines[0] and "0755" in lines[0] and "0700" in lines[0], lines
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        Settings(home=home).ensure_dirs()  # already owner-only: nothing to say
    assert not [r for r in caplog.records if "readable by other users" in r.getMessage()]
