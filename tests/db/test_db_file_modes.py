"""A SQLite database is its owner's alone: the file, its -wal and -shm (SQLite gives them the database
file's mode) and a folder created for it; an existing database others can read is tightened."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from db.engine import make_engine


@pytest.fixture
def common_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _modes(*paths: Path) -> list[str]:
    return [oct(stat.S_IMODE(p.stat().st_mode)) for p in paths]


def _write(engine) -> None:
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        conn.execute(text("INSERT INTO t VALUES (1)"))
        conn.commit()


def test_a_new_database_and_its_wal_and_shm_are_owner_only(tmp_path: Path, common_umask: None) -> None:
    path = tmp_path / "fresh" / "cooplab.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:  # the -wal and -shm exist while a connection is open
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
            conn.commit()
            wal, shm = path.with_name("cooplab.db-wal"), path.with_name("cooplab.db-shm")
            assert _modes(path.parent, path, wal, shm) == ["0o700", "0o600", "0o600", "0o600"]
    finally:
        engine.dispose()


def test_an_existing_readable_database_is_tightened_with_a_log_line(
    tmp_path: Path, common_umask: None, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cooplab.db"
    engine = make_engine(f"sqlite:///{path}")
    _write(engine)
    engine.dispose()
    for name in ("cooplab.db", "cooplab.db-wal", "cooplab.db-shm"):
        (tmp_path / name).touch()
        os.chmod(tmp_path / name, 0o644)
    with caplog.at_level(logging.WARNING):
        engine = make_engine(f"sqlite:///{path}")
    try:
        _write(engine)
        assert _modes(path, path.with_name("cooplab.db-wal"), path.with_name("cooplab.db-shm")) == ["0o600"] * 3
    finally:
        engine.dispose()
    lines = [r.getMessage() for r in caplog.records if "readable by other users" in r.getMessage()]
    assert len(lines) == 1 and str(path) in lines[0] and "0644" in lines[0], lines
