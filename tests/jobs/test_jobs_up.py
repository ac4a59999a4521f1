"""``cooplab up``: the dashboard and an embedded worker start together and stop together on SIGTERM."""

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

from db.store import Store
from tests.jobs.helpers import ROOT, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


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


def test_up_serves_the_dashboard_with_a_worker_and_sigterm_stops_both(jobs_env, tmp_path):
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
            descendants = psutil.Process(proc.pid).children(recursive=True)
            assert len(descendants) >= 3  # dashboard, worker parent, its prefork child

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log_path.read_text()
            wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in descendants),
                     20, "every child process to exit")
            assert store.list_workers(online_only=True) == []  # the worker went offline cleanly
        assert not _healthy(port)
    finally:
        for p in [psutil.Process(proc.pid) if proc.poll() is None else None, *descendants]:
            if p is not None:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        if proc.poll() is None:
            proc.wait(timeout=10)
