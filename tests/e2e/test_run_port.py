"""`make run` takes a port and a host (``PORT=8642 make run``), and ``cooplab up`` / ``cooplab ui``
check the port before anything else: a busy port prints only the error, at once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.e2e.conftest import ROOT


def _make_run(**env: str) -> str:
    """What ``make run`` would run (``make -n``: nothing is installed or started)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PORT", "HOST")}
    done = subprocess.run(["make", "-n", "run"], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                          timeout=60, check=True)
    return next(line for line in done.stdout.splitlines() if "cooplab up" in line)


def test_make_run_takes_a_port_and_a_host() -> None:
    assert _make_run().endswith("cooplab up --port 8501 --host 127.0.0.1")
    assert _make_run(PORT="8642").endswith("cooplab up --port 8642 --host 127.0.0.1")
    assert _make_run(PORT="8642", HOST="0.0.0.0").endswith("cooplab up --port 8642 --host 0.0.0.0")


@pytest.mark.parametrize("command", ["up", "ui"])
def test_a_busy_port_prints_only_the_error(tmp_path, command: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
        env.update({"COOPLAB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)})
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "cooplab", command, "--port", str(port)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    assert done.returncode == 2
    assert "http://" not in done.stdout  # no dashboard URL for a dashboard that cannot start
    assert done.stderr.strip() == (f"Port {port} on 127.0.0.1 is already in use; stop what listens there or "
                                   f"choose another port: --port {port + 1} (make run: PORT={port + 1} make run)")
    assert took < 10  # checked first, not after the supervisor gave up
    assert not (tmp_path / "home" / "cooplab.db").exists()  # nothing was started or created
