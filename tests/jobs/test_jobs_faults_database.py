"""The database under faults while a run trains: an outage of a private PostgreSQL server (stopped and
started again), and a run settled elsewhere while its job still writes. Real workers, real servers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from db import states
from db.migrate import upgrade
from db.models import MetricRow
from db.store import Store
from jobs.client import submit_run
from jobs.settings import Settings
from tests.jobs.fault_helpers import PrivatePostgres, assert_each_step_once
from tests.jobs.helpers import (
    ROOT,
    START_TIMEOUT_S,
    WorkerProcess,
    tiny_config,
    wait_for,
    wait_until_final,
    wait_until_step,
)


def _start_worker(tmp_path: Path, name: str = "worker") -> WorkerProcess:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log_path = tmp_path / f"{name}.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    worker = WorkerProcess(proc, log_path)
    wait_for(lambda: " ready." in worker.log() or proc.poll() is not None, 90, "the worker to be ready")
    assert proc.poll() is None, worker.log()
    return worker


@pytest.fixture
def private_postgres(tmp_path: Path) -> Iterator[PrivatePostgres]:
    server = PrivatePostgres.started(tmp_path / "pg")
    try:
        yield server
    finally:
        server.remove()


def _metric_rows(store: Store, run_id: int) -> int:
    from sqlalchemy import func, select

    from db.engine import read_session

    with read_session(store.engine) as s:
        return s.scalar(select(func.count()).select_from(MetricRow).where(MetricRow.run_id == run_id))


@pytest.mark.integration
@pytest.mark.slow
def test_a_10_s_database_outage_mid_run_pauses_training_and_loses_no_step(jobs_env, tmp_path, monkeypatch,
                                                                            private_postgres):
    """PostgreSQL stopped (immediate shutdown) for 10 s at step 3 of 40: the job's step writes wait
    and retry, the run ends ``succeeded`` with every step stored exactly once."""
    monkeypatch.setenv("COOPLAB_DATABASE_URL", private_postgres.url)
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", "60")  # the outage is shorter than the heartbeat timeout
    settings = Settings()
    upgrade(settings.resolved_database_url)
    worker = _start_worker(tmp_path)
    try:
        with Store(settings.resolved_database_url) as store:
            experiment_id = store.create_experiment("outage").id
            run_id = submit_run(tiny_config(max_steps=40, checkpoint_interval=0), experiment_id=experiment_id,
                                settings=settings)
            wait_until_step(store, run_id, 3)
            private_postgres.stop("immediate")
            t0 = time.monotonic()
            time.sleep(10)
            private_postgres.start()
            print(f"\nPostgreSQL down for {time.monotonic() - t0:.1f} s")
            wait_until_final(store, run_id, START_TIMEOUT_S)
            run = store.get_run(run_id)
            assert run.status == states.SUCCEEDED, (run.status, run.error)
            assert run.step == 40
            assert len(assert_each_step_once(store, run_id)) == 40
            assert worker.proc.poll() is None
    finally:
        worker.kill()


@pytest.mark.integration
@pytest.mark.slow
def test_writes_are_refused_after_a_run_is_settled_and_its_job_stops(jobs_env, store, experiment_id, tmp_path,
                                                                      monkeypatch):
    """A run marked ``lost`` (as a wrong verdict would) while its job trains: not one more step, episode
    or heartbeat lands in it, and the job process exits at its next write."""
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", "40")  # a beat every 10 s: only the writes can tell
    settings = Settings()
    worker = _start_worker(tmp_path)
    try:
        run_id = submit_run(tiny_config(max_steps=500, checkpoint_interval=0), experiment_id=experiment_id,
                            settings=settings)
        wait_until_step(store, run_id, 2)
        (job_pid,) = worker.job_pids()
        store.transition(run_id, states.LOST, error="declared lost by the test")
        t0 = time.monotonic()
        settled = store.get_run(run_id)
        rows = _metric_rows(store, run_id)
        wait_for(lambda: not psutil.pid_exists(job_pid) or psutil.Process(job_pid).status() == psutil.STATUS_ZOMBIE,
                 30, "the job process to exit")
        print(f"\nrun settled while training -> job exited after {time.monotonic() - t0:.2f} s")
        time.sleep(1.0)
        run = store.get_run(run_id)
        assert run.status == states.LOST and run.error == "declared lost by the test"
        assert run.step == settled.step, f"{run.step - settled.step} steps landed after the run was lost"
        assert _metric_rows(store, run_id) == rows
        assert run.heartbeat_at <= run.finished_at, (run.heartbeat_at, run.finished_at)
        assert time.monotonic() - t0 < 8  # its next step write, not its next heartbeat (10 s)
        assert worker.proc.poll() is None
    finally:
        worker.kill()


def test_retry_pauses_add_up_to_the_stated_outage() -> None:
    from jobs.db_sink import retry_delays

    assert retry_delays(10) == [0.5, 1.0, 2.0, 4.0, 2.5]
    assert retry_delays(60) == [0.5, 1.0, 2.0, 4.0] + [5.0] * 10 + [2.5]
    assert retry_delays(0) == []


def test_a_retried_step_whose_commit_went_through_is_not_written_twice(store, experiment_id) -> None:
    """``again``: the first attempt's commit reached the database but its answer was lost."""
    from db.errors import RunSettledError

    run = store.create_run(experiment_id, {"name": "x"}, queue="cpu")
    with pytest.raises(RunSettledError, match="is queued"):  # a job writes only to a live run
        store.log_step(run.id, 1, 4, {"train/reward_mean": 0.5}, live_only=True)
    store.transition(run.id, states.STARTING)
    store.transition(run.id, states.RUNNING)
    store.log_step(run.id, 1, 4, {"train/reward_mean": 0.5}, live_only=True)
    store.log_step(run.id, 1, 4, {"train/reward_mean": 0.5}, live_only=True, again=True)
    store.log_step(run.id, 2, 8, {"train/reward_mean": 0.7}, live_only=True, again=True)  # not yet stored: written
    assert [p.step for p in store.iter_metrics(run.id, ["train/reward_mean"])] == [1, 2]
    store.transition(run.id, states.LOST, error="x")
    with pytest.raises(RunSettledError, match="run .* is lost"):
        store.heartbeat(run.id, live_only=True)
    assert _metric_rows(store, run.id) == 2


def test_cooplab_runs_says_in_one_line_that_the_database_is_unreachable(jobs_env) -> None:
    """Before: a warning of the dead-run look ("could not look for dead runs: ...") and then the error,
    two lines where docs/jobs.md promises one."""
    from tests.jobs.fault_helpers import cli, free_port

    port = free_port()  # nothing listens there
    env = dict(os.environ, COOPLAB_DATABASE_URL=f"postgresql://lab:s3cret@127.0.0.1:{port}/cooplab")
    listed, seconds = cli("runs", env=env)
    print(f"\n`cooplab runs` on an unreachable database: {seconds:.1f} s")
    assert listed.returncode == 1 and listed.stdout == "", listed.stdout
    (line,) = listed.stderr.splitlines()
    assert line.startswith(f"error: the database postgresql://lab:***@127.0.0.1:{port}/cooplab cannot be used: "
                           f'connection to server at "127.0.0.1", port {port} failed: Connection refused'), line
