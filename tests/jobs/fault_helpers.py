"""Helpers for the fault tests: a private Redis server, a small filesystem, the CLI as a subprocess,
and checks that no metric row was lost or duplicated."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
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


def sqlite_write_locked(database: Path) -> bool:
    """Whether some connection holds the write lock of the SQLite file ``database`` now."""
    conn = sqlite3.connect(database, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            return True
        raise
    else:
        conn.execute("ROLLBACK")
        return False
    finally:
        conn.close()


def freeze_between_writes(pid: int, database: Path, *, group: bool = False, tries: int = 200) -> None:
    """SIGSTOP the process ``pid`` (its process group with ``group``) at a moment it holds no write lock on
    the SQLite file ``database``. A process frozen inside a write transaction keeps every other writer of
    the file out until it dies (the frozen-writer fault is tested apart); a test of what a frozen
    machine's heartbeat loss does must not depend on where its writes were when it froze."""
    send = os.killpg if group else os.kill
    for _ in range(tries):
        send(pid, signal.SIGSTOP)
        if not sqlite_write_locked(database):
            return
        send(pid, signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError(f"process {pid} held the write lock of {database} at each of {tries} tries")


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


def _postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return found[-1].parent if found else None


class PrivatePostgres:
    """A PostgreSQL server of the test's own (its own data folder and port, trust auth), so a test may
    stop and start it without touching the shared server. Run as the ``postgres`` user when the test
    runs as root (the server refuses root)."""

    def __init__(self, folder: Path, port: int, bin_dir: Path) -> None:
        self.folder = folder
        self.port = port
        self.bin = bin_dir

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=timeout)

    @classmethod
    def started(cls, folder: Path) -> PrivatePostgres:
        bin_dir = _postgres_bin()
        if bin_dir is None:
            pytest.skip("PostgreSQL server binaries are not installed (apt-get install -y postgresql)")
        if os.geteuid() == 0:
            try:
                import pwd

                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root without a 'postgres' user to run a private server as")
            # the server's user must reach its folder: one of its own under /tmp, not the test's (mode 700)
            import tempfile

            folder = Path(tempfile.mkdtemp(prefix="cooplab-pg-"))
            os.chown(folder, owner.pw_uid, owner.pw_gid)
        server = cls(folder / "data", free_port(), bin_dir)
        made = server._run(str(bin_dir / "initdb"), "-D", str(server.folder), "-U", "postgres", "-A", "trust",
                           "--no-sync")
        if made.returncode != 0:
            pytest.skip(f"initdb failed: {made.stderr.strip()[-300:]}")
        server.start()
        return server

    def start(self) -> None:
        started = self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder), "-l", str(self.folder / "server.log"),
                            "-w", "-o", f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync=off",
                            "start")
        if started.returncode != 0:
            raise AssertionError(f"the private PostgreSQL did not start: {started.stderr or started.stdout}")

    def stop(self, mode: str = "immediate") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.folder.parent, ignore_errors=True)

    def terminate_backends(self) -> int:
        """``pg_terminate_backend`` of every other connection to the server; returns how many."""
        import sqlalchemy

        from db.engine import make_engine

        engine = make_engine(self.url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(sqlalchemy.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'")).all()
            return len(rows)
        finally:
            engine.dispose()



SKEWED_CLOCK = Path(__file__).resolve().parent / "skewed_clock"


def skewed_clock_env(shift_s: float, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) for a Python subprocess whose clock reads ``shift_s`` seconds
    ahead (negative: behind) of the system's: :func:`db.models.utcnow` is shifted in that process (and
    its children) only (``tests/jobs/skewed_clock/sitecustomize.py``)."""
    env = dict(env or os.environ)
    env["COOPLAB_TEST_CLOCK_SHIFT_S"] = str(shift_s)
    env["PYTHONPATH"] = os.pathsep.join([str(SKEWED_CLOCK), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env
