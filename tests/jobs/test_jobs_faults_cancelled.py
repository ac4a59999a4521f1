"""Cancelled runs cost no job process: 200 runs queued and cancelled before any worker starts, then one
live run. The worker drops each cancelled run's message in its own process after a database check
(:mod:`jobs.consume`), without forking a job process for it, and starts the live run at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from db import states
from jobs.client import cancel_queued, submit_run
from jobs.settings import Settings
from tests.jobs.helpers import ROOT, START_TIMEOUT_S, WorkerProcess, tiny_config, wait_for, wait_until_final

CANCELLED_RUNS = 200


@pytest.mark.integration
@pytest.mark.slow
def test_200_cancelled_runs_fork_no_job_process_before_the_live_one(jobs_env, store, experiment_id, tmp_path: Path):
    """Before: a new worker forked a fresh job process for each dead message (0.8 s each) before it
    reached the live run: 167 s for 205 of them."""
    settings = Settings()
    config = tiny_config(max_steps=2, checkpoint_interval=0)
    cancelled = []
    for _ in range(CANCELLED_RUNS):
        run_id = submit_run(config, experiment_id=experiment_id, settings=settings)
        cancel_queued(run_id, settings=settings)
        cancelled.append(run_id)
    live = submit_run(config, experiment_id=experiment_id, settings=settings)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    worker = WorkerProcess(proc, log_path)
    try:
        wait_for(lambda: " ready." in worker.log() or proc.poll() is not None, 90, "the worker to be ready")
        t0 = time.monotonic()
        wait_for(lambda: store.get_run(live).status != states.QUEUED, 60,
                 f"the live run to start behind {CANCELLED_RUNS} cancelled ones")
        started_after = time.monotonic() - t0
        wait_until_final(store, live, START_TIMEOUT_S)
        print(f"\nlive run started {started_after:.1f} s after the worker was ready")
        assert store.get_run(live).status == states.SUCCEEDED
        log = worker.log()
        assert log.count("is cancelled: its message is dropped") == CANCELLED_RUNS, log[-3000:]
        assert not [i for i in cancelled if f"run {i} (experiment" in log], "a cancelled run reached a job process"
        assert started_after < 30
        assert all(store.get_run(i).status == states.CANCELLED for i in cancelled)
    finally:
        worker.kill()
