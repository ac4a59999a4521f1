"""Helpers for the fault tests: a private Redis server, a small filesystem, the CLI as a subprocess,
and checks that no metric row was lost or duplicated."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.store import Store
from tests.jobs.helpers import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A redis-server of the test's own (no persistence), on a free port; never the shared one."""

    def __init__(self, port: int, folder: Path) -> None:
        self.port = port
        self.folder = folder
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.folder)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise AssertionError("the private redis-server did not start") from None
                time.sleep(0.05)

    @classmethod
    def started(cls, folder: Path) -> PrivateRedis:
        """A server on a free port, started (the test is skipped without redis-server)."""
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
        server = cls(free_port(), folder)
        server.start()
        return server

    def stop(self) -> None:
        """Stop without saving (its messages are gone)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@contextlib.contextmanager
def small_filesystem(folder: Path, size: str = "5m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` on ``folder`` (root only; the test is skipped otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``python -m cooplab ARGS`` with the test's environment; returns the result and its seconds."""
    env = dict(env or os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t0 = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "cooplab", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=timeout)
    return result, time.monotonic() - t0


def assert_each_step_once(store: Store, run_id: int, key: str = "train/reward_mean") -> list[int]:
    """Every logged step of ``key`` appears exactly once, from 1 up to the run's progress (no row lost or
    duplicated); returns the steps."""
    steps = [p.step for p in store.iter_metrics(run_id, [key])]
    assert len(steps) == len(set(steps)), f"run {run_id}: duplicated steps {sorted(steps)}"
    run = store.get_run(run_id)
    first = steps[0] if steps else 1
    assert steps == list(range(first, first + len(steps))), f"run {run_id}: steps {steps} have gaps"
    assert not steps or steps[-1] >= run.step - 1, f"run {run_id}: progress {run.step}, last step stored {steps[-1]}"
    return steps
