"""Skewed clocks: a worker whose process reads a wall clock 120 s behind (``tests/jobs/skewed_clock``;
the system clock stays true) trains a run while ``cooplab runs`` on a true clock looks for lost runs.
Liveness is judged on the database server's clock, so the healthy run is not taken for lost, and the
worker's measured skew is stored for the Workers page."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from db import states
from jobs.client import submit_run
from jobs.settings import Settings
from tests.jobs.fault_helpers import assert_each_step_once, cli, skewed_clock_env
from tests.jobs.helpers import ROOT, START_TIMEOUT_S, WorkerProcess, tiny_config, wait_for, wait_until_final


def _start_skewed_worker(tmp_path: Path, shift_s: float) -> WorkerProcess:
    env = skewed_clock_env(shift_s)
    env["OMP_NUM_THREADS"] = "1"
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    worker = WorkerProcess(proc, log_path)
    wait_for(lambda: " ready." in worker.log() or proc.poll() is not None, 90, "the worker to be ready")
    assert proc.poll() is None, worker.log()
    return worker


@pytest.mark.integration
@pytest.mark.slow
def test_a_worker_120_s_behind_keeps_its_healthy_run_and_shows_its_skew(jobs_env, store, experiment_id, tmp_path):
    """Before: its heartbeats were stamped 120 s in the past, and the first ``cooplab runs`` elsewhere
    (heartbeat timeout 5 s) marked the healthy run ``lost``."""
    settings = Settings()
    worker = _start_skewed_worker(tmp_path, -120)
    try:
        run_id = submit_run(tiny_config(max_steps=12, checkpoint_interval=0), experiment_id=experiment_id,
                            settings=settings)
        wait_for(lambda: store.get_run(run_id).status != states.QUEUED, START_TIMEOUT_S, "the run to start")
        t0 = time.monotonic()
        while store.get_run(run_id).is_active and time.monotonic() - t0 < START_TIMEOUT_S:
            listed, _ = cli("runs")  # a reader on the true clock: it settles lost runs first
            assert listed.returncode == 0, listed.stderr
            time.sleep(0.5)
        wait_until_final(store, run_id, START_TIMEOUT_S)
        run = store.get_run(run_id)
        assert run.status == states.SUCCEEDED, (run.status, run.error)
        assert len(assert_each_step_once(store, run_id)) == 12
        (seen,) = store.list_workers()
        assert seen.clock_skew_s == pytest.approx(-120, abs=3), seen
    finally:
        worker.kill()
