"""The launcher and sign-in: ``cooplab ui`` / ``cooplab up`` say whether the dashboard will ask for a
password and refuse to listen off 127.0.0.1 without one; ``cooplab hash-password`` makes the hash.
The supervisor is replaced by a recorder, so no server starts (one test runs the real command, which
must exit before starting anything)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import psutil
import pytest
from typer.testing import CliRunner

import jobs.supervisor
from app.access import hash_password, verify_password
from cooplab.cli import app
from tests.jobs.helpers import ROOT

runner = CliRunner()
PASSWORD = "correct horse battery staple"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The supervisors the commands would have run (their arguments), none of them started."""
    calls: list[dict] = []

    class Recorder:
        def __init__(self, **kwargs) -> None:
            calls.append(kwargs)

        def run(self) -> int:
            return 0

    monkeypatch.setattr(jobs.supervisor, "Supervisor", Recorder)
    return calls


@pytest.mark.parametrize("command", ["ui", "up"])
@pytest.mark.parametrize("stored", [None, "not-a-hash"])
def test_off_loopback_without_a_usable_hash_the_launcher_refuses(jobs_env, started, monkeypatch, command,
                                                                 stored) -> None:
    if stored:
        monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", stored)
    result = runner.invoke(app, [command, "--host", "0.0.0.0"])
    assert result.exit_code == 2, result.output
    assert "refusing to start the dashboard on 0.0.0.0" in result.output
    assert "COOPLAB_UI_PASSWORD_HASH" in result.output and "cooplab hash-password" in result.output
    assert started == []


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.2", "::"])
def test_with_a_hash_the_launcher_says_signin_is_required(jobs_env, started, monkeypatch, host) -> None:
    monkeypatch.setenv("COOPLAB_UI_PASSWORD_HASH", hash_password(PASSWORD, n=2**10))
    result = runner.invoke(app, ["ui", "--host", host])
    assert result.exit_code == 0, result.output
    assert f"Sign-in: required (the dashboard listens on {host})" in result.output
    assert [call["host"] for call in started] == [host]


def test_on_loopback_the_launcher_says_no_signin_is_needed(jobs_env, started) -> None:
    result = runner.invoke(app, ["up", "--no-worker"])
    assert result.exit_code == 0, result.output
    assert "Sign-in: not required (the dashboard listens on 127.0.0.1" in result.output
    assert [call["host"] for call in started] == ["127.0.0.1"]


def test_hash_password_reads_stdin_and_prints_a_hash_that_verifies() -> None:
    result = runner.invoke(app, ["hash-password"], input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("scrypt:")]
    assert verify_password(PASSWORD, line) and not verify_password(PASSWORD + "\n", line)
    assert PASSWORD not in result.output
    short = runner.invoke(app, ["hash-password"], input="short\n")
    assert short.exit_code == 2 and "at least 8 characters" in short.output


def test_the_real_command_exits_before_starting_a_server(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)})
    proc = subprocess.Popen([sys.executable, "-m", "cooplab", "ui", "--host", "0.0.0.0", "--port", "1"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:  # had it started a dashboard anyway (in its own session), nothing of it outlives the test
        with contextlib.suppress(psutil.Error):
            for process in [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]:
                with contextlib.suppress(psutil.Error):
                    process.kill()
        proc.wait()
    assert proc.returncode == 2, stderr
    assert "COOPLAB_UI_PASSWORD_HASH is not set" in stderr and "cooplab hash-password" in stderr
    assert not (tmp_path / "home").exists()  # it stopped before creating the data directory
