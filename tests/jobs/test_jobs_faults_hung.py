"""A run's end is its job's, not the reaper's guess: a real worker's job whose heartbeat the database did
not take for longer than the timeout (another, hung, job held SQLite's write lock) is spared by the
reaper of its machine, because its job file still pulses; a job that is really frozen (SIGSTOP) stops
pulsing and is marked ``lost``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from db import states
from db.engine import write_session
from db.store import Store
from jobs.client import submit_run
from jobs.liveness import alive_here, look
from jobs.settings import Settings
from tests.jobs.fault_helpers import assert_each_step_once, freeze_between_writes
from tests.jobs.helpers import (
    ROOT,
    START_TIMEOUT_S,
    WorkerProcess,
    tiny_config,
    wait_for,
    wait_until_final,
    wait_until_step,
)

HEARTBEAT_TIMEOUT_S = 3.0


def _start_worker(tmp_path: Path) -> WorkerProcess:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    worker = WorkerProcess(proc, log_path)
    wait_for(lambda: " ready." in worker.log() or proc.poll() is not None, 90, "the worker to be ready")
    assert proc.poll() is None, worker.log()
    return worker


def _reap_as_the_lock_frees(store: Store, settings: Settings, held_s: float) -> list[int]:
    """Hold the database's write lock for ``held_s`` seconds, as a job hung inside a write transaction
    does (every other job's writes, its heartbeat included, wait), and run the reaper of this machine at
    the moment the lock is released, before any waiting job can write."""
    with write_session(store.engine) as s:
        s.connection()  # BEGIN IMMEDIATE: the lock is taken now
        time.sleep(held_s)
        return store.within(s).reap_lost(settings.heartbeat_timeout_s, spare=alive_here(store, settings))


@pytest.mark.integration
@pytest.mark.slow
def test_a_live_job_whose_heartbeat_was_held_up_keeps_its_run_and_a_frozen_one_is_lost(jobs_env, store,
                                                                                       experiment_id, tmp_path,
                                                                                       monkeypatch):
    """Before: the first look after the database took writes again marked the healthy run ``lost``
    ("worker died or hung"), and its job's own end was then discarded ("already lost; keeping that")."""
    # a 3 s heartbeat timeout (a beat and a pulse every 0.75 s): the lock is held 5 s, the frozen job's
    # run is lost about 3 s after it froze
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", str(HEARTBEAT_TIMEOUT_S))
    settings = Settings()
    worker = _start_worker(tmp_path)
    try:
        healthy = submit_run(tiny_config(max_steps=15, checkpoint_interval=0), experiment_id=experiment_id,
                             settings=settings)
        wait_until_step(store, healthy, 2)
        assert _reap_as_the_lock_frees(store, settings, settings.heartbeat_timeout_s + 2) == []
        assert store.get_run(healthy).is_active
        wait_until_final(store, healthy, START_TIMEOUT_S)
        run = store.get_run(healthy)
        assert run.status == states.SUCCEEDED, (run.status, run.error)
        assert len(assert_each_step_once(store, healthy)) == 15

        frozen = submit_run(tiny_config(max_steps=400, checkpoint_interval=0), experiment_id=experiment_id,
                            settings=settings)
        wait_until_step(store, frozen, 2)
        (job_pid,) = worker.job_pids()
        freeze_between_writes(job_pid, settings.data_dir / "cooplab.db")
        try:
            t0 = time.monotonic()
            def lost() -> bool:  # by this look, or by the worker's own maintenance pass
                look(store, settings)
                return store.get_run(frozen).status == states.LOST

            wait_for(lost, 30, "the frozen run to be marked lost", interval=0.5)
            print(f"\nfrozen job's run lost after {time.monotonic() - t0:.1f} s (heartbeat timeout {HEARTBEAT_TIMEOUT_S:g} s)")
            run = store.get_run(frozen)
            assert run.status == states.LOST and "no heartbeat" in (run.error or ""), (run.status, run.error)
        finally:
            os.kill(job_pid, signal.SIGCONT)
        wait_for(lambda: not psutil.pid_exists(job_pid) or psutil.Process(job_pid).status() == psutil.STATUS_ZOMBIE,
                 30, "the thawed job to exit (its writes are refused)")
        assert store.get_run(frozen).status == states.LOST
    finally:
        worker.kill()
