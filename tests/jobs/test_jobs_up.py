"""``cooplab up``: the dashboard and an embedded worker start together and stop together on SIGTERM,
letting the run in progress stop at a step boundary; a dashboard that dies is started again while
training goes on."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from db import states
from db.store import Store
from jobs.client import submit_run
from tests.jobs.helpers import ROOT, tiny_config, wait_for, wait_until_final, wait_until_step


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


def _dashboard(up_pid: int) -> psutil.Process | None:
    return next((p for p in psutil.Process(up_pid).children() if "streamlit" in " ".join(p.cmdline())), None)


@pytest.mark.integration
@pytest.mark.slow
def test_up_restarts_a_killed_dashboard_and_sigterm_stops_both(jobs_env, experiment_id, tmp_path):
    """The dashboard killed (``kill -9``, as the OOM killer does) while a run trains: it is started
    again and answers, the run trains on to ``succeeded``. Then SIGTERM (what Ctrl-C amounts to) while
    the next run trains: that run checkpoints and ends ``stopped`` with the shutdown in its notes, the
    worker goes offline, and no process is left behind."""
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
            first = submit_run(tiny_config(max_steps=4), experiment_id=experiment_id, settings=jobs_env)
            wait_until_step(store, first, 1)
            killed = _dashboard(proc.pid)
            os.killpg(killed.pid, signal.SIGKILL)
            t0 = time.monotonic()
            # queued behind the first: it starts while the dashboard comes back
            second = submit_run(tiny_config(max_steps=500), experiment_id=experiment_id, settings=jobs_env)
            wait_for(lambda: proc.poll() is not None or not _healthy(port), 10, "the killed dashboard to go")
            wait_for(lambda: proc.poll() is not None or _healthy(port), 90, "the dashboard to answer again")
            assert proc.poll() is None, log_path.read_text()[-3000:]
            print(f"\ndashboard killed under `cooplab up` -> answering again after {time.monotonic() - t0:.1f} s")
            assert _dashboard(proc.pid).pid != killed.pid
            wait_until_final(store, first, 60)
            run = store.get_run(first)
            assert (run.status, run.step, run.error) == (states.SUCCEEDED, 4, None), log_path.read_text()[-3000:]

            wait_until_step(store, second, 1)
            # dashboard, worker parent and its job process
            descendants = wait_for(lambda: _descendants(proc.pid, at_least=3), 60, "the worker's job process")

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log_path.read_text()
            wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in descendants),
                     20, "every child process to exit")
            assert store.list_workers(online_only=True) == []  # the worker went offline cleanly
            run = store.get_run(second)
            assert run.status == states.STOPPED and run.error is None, run.error
            assert run.notes == "stopped: cooplab up shut down: SIGTERM"  # not taken for a user's Stop
            assert store.latest_checkpoint(second).step == run.step
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
    assert command[command.index("--runner.postScriptGC") + 1] == "false"  # no full GC after every live refresh
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


def test_a_dashboard_that_keeps_dying_soon_after_its_start_is_given_up_on():
    """1, 2, 4, 8 s between restarts while it dies within a minute of its start; the fifth such death
    in a row is final for the dashboard; a worker is always started again; a minute up resets both."""
    from jobs.supervisor import Restarts

    dashboard, worker = Restarts(give_up=True), Restarts()
    delays = []
    for now in range(0, 50, 10):
        assert not worker.failed(float(now))
        worker.started_at = float(now)
        if dashboard.failed(float(now)):
            break
        delays.append(dashboard.current)
        dashboard.started_at = float(now)
    assert delays == [1.0, 2.0, 4.0, 8.0] and dashboard.failures == 5
    assert worker.current == 16.0 and not worker.failed(200.0) and worker.current == 1.0


def test_runs_stopped_by_a_shutdown_say_why_first_in_their_notes(jobs_env, store, experiment_id):
    from jobs.supervisor import Supervisor

    up = Supervisor(jobs_env)
    config = store.get_experiment(experiment_id).config
    run = store.create_run(experiment_id, config, "cpu")
    store.transition(run.id, states.STARTING)
    store.transition(run.id, states.RUNNING)
    store.update_run(run.id, worker=up.worker_name)
    store.set_run_notes(run.id, notes="lr sweep, second try")
    others = store.create_run(experiment_id, config, "cpu")  # queued, no worker: not this worker's
    up.cause = "the dashboard kept failing (exited with code 1, 5 times in a row within 60 s of its start)"
    up._stop_worker_runs()
    stopped = store.get_run(run.id)
    assert stopped.status == states.STOPPING and stopped.notes == (
        "stopped: cooplab up shut down: the dashboard kept failing (exited with code 1, 5 times in a row within "
        "60 s of its start)\nlr sweep, second try")
    assert store.get_run(others.id).status == states.QUEUED and store.get_run(others.id).notes == ""
