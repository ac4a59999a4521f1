"""A process hung inside a write transaction (SIGSTOP while it holds a run's row lock) on a real
PostgreSQL server: readers and ``cooplab runs`` answer at once, the reaper passes the locked row by
instead of waiting on it, the server ends the hung transaction (``idle_in_transaction_session_timeout``
of write transactions), and the hung run is marked ``lost`` after the heartbeat timeout while a healthy
run beside it keeps running.

The PostgreSQL case uses a heartbeat timeout shorter than the server's idle-transaction timeout, so the
hung run's heartbeat goes stale while its row is still locked: ``cooplab runs`` and the reaper passes
run against the held lock, and the run is lost once the server ends the transaction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sqlalchemy import Engine

from db import states
from db.engine import WRITE_IDLE_TIMEOUT_S
from db.store import Store
from tests.jobs.fault_helpers import cli
from tests.jobs.helpers import ROOT, wait_for

HEARTBEAT_TIMEOUT_S = 3.0  # well below WRITE_IDLE_TIMEOUT_S: the heartbeat is stale while the row is locked


@pytest.fixture
def pg_store(postgres_schema: tuple[str, Engine]) -> Iterator[Store]:
    from db.models import Base

    url, engine = postgres_schema
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    with Store(url) as store:
        yield store


def _running_run(store: Store, experiment_id: int) -> int:
    run_id = store.create_run(experiment_id, {}, "cpu").id
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    return run_id


HANG = """
import os, signal, sys
from db.engine import write_session
from db.store import Store
store = Store(sys.argv[1])
with write_session(store.engine) as s:
    store.within(s).heartbeat(int(sys.argv[2]))  # the run's row is locked until commit
    print("locked", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
print("committed", flush=True)
"""


@pytest.mark.integration
def test_a_job_hung_in_a_transaction_blocks_no_one_and_is_lost_after_the_timeout(pg_store: Store, tmp_path: Path):
    """Before: ``cooplab runs`` after the heartbeat timeout (its reaper's UPDATE waits on the hung job's
    row lock) hung until killed, and the hung run was not marked lost while the lock was held."""
    store = pg_store
    experiment_id = store.create_experiment("hung").id
    hung, healthy = _running_run(store, experiment_id), _running_run(store, experiment_id)
    stop_beating = threading.Event()

    def beat() -> None:  # the healthy run's job: a heartbeat every 0.5 s from the start
        with Store(store.url) as own:
            while True:
                own.heartbeat(healthy, live_only=True)
                if stop_beating.wait(0.5):
                    return

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    proc = subprocess.Popen([sys.executable, "-c", HANG, store.url, str(hung)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, 10, "the job to stop")
        t0 = time.monotonic()
        time.sleep(HEARTBEAT_TIMEOUT_S + 0.5)  # the hung run's heartbeat is stale now: the reaper must act
        started = time.monotonic()
        assert store.reap_lost(HEARTBEAT_TIMEOUT_S) == []  # the hung run's row is locked: passed by
        took = time.monotonic() - started
        assert took < 2, f"a reaper pass waited {took:.1f} s on the hung job's row lock"
        env = {**os.environ, "COOPLAB_DATABASE_URL": store.url, "COOPLAB_HOME": str(tmp_path / "home"),
               "COOPLAB_HEARTBEAT_TIMEOUT_S": str(HEARTBEAT_TIMEOUT_S)}
        listed, seconds = cli("runs", env=env, timeout=40)
        assert listed.returncode == 0, listed.stderr
        assert seconds < 15, f"cooplab runs took {seconds:.1f} s"
        while store.get_run(hung).status != states.LOST:
            store.reap_lost(HEARTBEAT_TIMEOUT_S)
            assert time.monotonic() - t0 < WRITE_IDLE_TIMEOUT_S + 15, "the hung run was not marked lost"
            time.sleep(0.2)
        lost_after = time.monotonic() - t0
        print(f"\nhung run lost {lost_after:.1f} s after it hung (heartbeat timeout {HEARTBEAT_TIMEOUT_S} s, "
              f"idle-transaction timeout {WRITE_IDLE_TIMEOUT_S} s)")
        assert store.get_run(healthy).status == states.RUNNING
        os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=30)
        assert proc.returncode != 0  # the server ended its transaction: its commit did not go through
        run = store.get_run(hung)
        assert run.status == states.LOST and "no heartbeat" in (run.error or "")
    finally:
        stop_beating.set()
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()


@pytest.mark.integration
def test_a_job_hung_holding_the_sqlite_write_lock_does_not_hang_readers_or_maintenance(sqlite_store: Store,
                                                                                      tmp_path: Path):
    """SQLite has one writer at a time: while a stopped process holds the write lock nothing can be
    written, but ``cooplab runs`` and a maintenance pass wait for it only briefly (their liveness writes
    give up, and the next look retries). Before: each waited the whole 30 s busy timeout."""
    from jobs.maintenance import run_maintenance
    from jobs.settings import Settings

    store = sqlite_store
    experiment_id = store.create_experiment("hung").id
    hung = _running_run(store, experiment_id)
    proc = subprocess.Popen([sys.executable, "-c", HANG, store.url, str(hung)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    env = {**os.environ, "COOPLAB_DATABASE_URL": store.url, "COOPLAB_HOME": str(tmp_path / "home"),
           "COOPLAB_HEARTBEAT_TIMEOUT_S": "1"}
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, 10, "the job to stop")
        time.sleep(1.5)  # its heartbeat is stale: the reaper wants to write
        assert store.get_run(hung).status == states.RUNNING  # readers are never blocked
        listed, seconds = cli("runs", env=env, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert seconds < 15, f"cooplab runs took {seconds:.1f} s"
        t0 = time.monotonic()
        run_maintenance(Settings(database_url=store.url, home=tmp_path / "home", heartbeat_timeout_s=1),
                        store=store, app=None, reconcile=False)
        assert time.monotonic() - t0 < 10, f"a maintenance pass took {time.monotonic() - t0:.1f} s"
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(timeout=30) == 0
        assert store.reap_lost(1) == [hung]  # once the lock is free, the next look settles it
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
