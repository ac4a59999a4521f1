"""``cooplab up``: the dashboard and an embedded worker start together and stop together on SIGTERM,
letting the run in progress stop at a step boundary."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import psutil
import pytest

from db import states
from db.store import Store
from jobs.client import submit_run
from tests.jobs.helpers import ROOT, tiny_config, wait_for, wait_until_step


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
            return response.read().strip() == b"ok"
    except OSError:
        return False


def _descendants(pid: int, at_least: int) -> list[psutil.Process]:
    found = psutil.Process(pid).children(recursive=True)
    return found if len(found) >= at_least else []


@pytest.mark.integration
@pytest.mark.slow
def test_up_serves_the_dashboard_with_a_worker_and_sigterm_stops_both(jobs_env, experiment_id, tmp_path):
    """SIGTERM (what Ctrl-C amounts to) while a run trains: the run checkpoints and ends ``stopped``,
    the worker goes offline, and no process is left behind."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "up", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    descendants: list[psutil.Process] = []
    try:
        wait_for(lambda: _healthy(port) or proc.poll() is not None, 90, "the dashboard to answer")
        assert proc.poll() is None, log_path.read_text()
        with Store(jobs_env.resolved_database_url) as store:
            wait_for(lambda: store.list_workers(online_only=True), 60, "the embedded worker to register")
            run_id = submit_run(tiny_config(max_steps=500), experiment_id=experiment_id, settings=jobs_env)
            wait_until_step(store, run_id, 1)
            # dashboard, worker parent and its job process
            descendants = wait_for(lambda: _descendants(proc.pid, at_least=3), 60, "the worker's job process")

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log_path.read_text()
            wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in descendants),
                     20, "every child process to exit")
            assert store.list_workers(online_only=True) == []  # the worker went offline cleanly
            run = store.get_run(run_id)
            assert run.status == states.STOPPED and run.error is None, run.error
            assert store.latest_checkpoint(run_id).step == run.step
        assert not _healthy(port)
    finally:
        for p in [psutil.Process(proc.pid) if proc.poll() is None else None, *descendants]:
            if p is not None:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        if proc.poll() is None:
            proc.wait(timeout=10)


def test_children_share_the_data_directory_as_an_absolute_path(tmp_path, monkeypatch):
    from jobs.settings import Settings
    from jobs.supervisor import child_environment, dashboard_command, worker_command

    monkeypatch.chdir(tmp_path)
    env = child_environment(Settings(home="relative-home"))
    assert env["COOPLAB_HOME"] == str(tmp_path / "relative-home")
    assert str(ROOT) in env["PYTHONPATH"].split(os.pathsep)
    command = dashboard_command(port=8555)
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    assert command[command.index("--server.port") + 1] == "8555"
    assert command[4].endswith(os.path.join("app", "server.py"))  # the pages plus the download route
    assert worker_command("cuda:2")[-2:] == ["--device", "cuda:2"]
    wide = dashboard_command(port=8555, address="0.0.0.0")
    assert wide[wide.index("--server.address") + 1] == "0.0.0.0"


@pytest.mark.integration
@pytest.mark.slow
def test_ui_listens_on_the_host_it_is_given(jobs_env, tmp_path):
    """``cooplab ui --host 0.0.0.0`` (what docker-compose runs) serves on every interface, with sign-in."""
    from app.access import hash_password

    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "COOPLAB_UI_PASSWORD_HASH": hash_password("correct horse battery staple", n=2**10)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log_path = tmp_path / "ui.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "ui", "--host", "0.0.0.0", "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    children: list[psutil.Process] = []
    try:
        wait_for(lambda: _healthy(port) or proc.poll() is not None, 90, "the dashboard to answer")
        assert proc.poll() is None, log_path.read_text()
        children = psutil.Process(proc.pid).children(recursive=True)
        listening = {(c.laddr.ip, c.laddr.port) for p in children for c in p.net_connections(kind="tcp")
                     if c.status == psutil.CONN_LISTEN}
        assert ("0.0.0.0", port) in listening, listening
        assert f"http://0.0.0.0:{port}" in log_path.read_text()
        assert "Sign-in: required (the dashboard listens on 0.0.0.0)" in log_path.read_text()
        proc.send_signal(signal.SIGTERM)  # the supervisor stops the dashboard and exits
        assert proc.wait(timeout=60) == 0, log_path.read_text()
    finally:
        for p in [psutil.Process(proc.pid) if proc.poll() is None else None, *children]:
            if p is not None:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        if proc.poll() is None:
            proc.wait(timeout=10)
