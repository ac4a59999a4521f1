"""The SQLite database file deleted (with its -wal and -shm files) while a real worker's run trains:
its job notices at its next write or heartbeat that the path no longer leads to the file it opened,
fails the run naming the file and its database id (in the run's log and its job file, not in the
deleted file), and stops; ``cooplab runs`` then says what happened in one line, and a new database
at the same place is refused the data directory with both database ids named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from db.migrate import upgrade
from jobs import jobfile
from jobs.client import submit_run
from jobs.settings import Settings
from tests.jobs.fault_helpers import cli
from tests.jobs.helpers import ROOT, WorkerProcess, tiny_config, wait_for, wait_until_step


@pytest.mark.integration
@pytest.mark.slow
def test_a_deleted_database_file_fails_its_run_naming_it(jobs_env, store, experiment_id, tmp_path: Path):
    """Before: the job kept writing to the unlinked file and ended ``succeeded`` there; ``cooplab runs``
    printed ``no such table: runs``; the next database's refusal named the same URL twice."""
    settings = Settings()
    database_id = store.database_id()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    worker = WorkerProcess(proc, log_path)
    try:
        wait_for(lambda: " ready." in worker.log() or proc.poll() is not None, 90, "the worker to be ready")
        run_id = submit_run(tiny_config(max_steps=300, checkpoint_interval=0), experiment_id=experiment_id,
                            settings=settings)
        wait_until_step(store, run_id, 3)
        (job_pid,) = worker.job_pids()
        store.close()
        database = settings.data_dir / "cooplab.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        wait_for(lambda: not psutil.pid_exists(job_pid) or psutil.Process(job_pid).status() == psutil.STATUS_ZOMBIE,
                 60, "the job to end")
        run_log = (settings.logs_dir / f"run-{run_id}.log").read_text()
        assert f"the database file {database} (database id {database_id}) was deleted while the run trained" in run_log
        last = jobfile.probe(settings.data_dir, run_id)
        assert last is not None and last.status == "failed", last
        assert "was deleted while the run trained" in (last.reason or "")

        listed, _ = cli("runs")
        assert listed.returncode == 1 and "Traceback" not in listed.stderr, listed.stderr
        assert "has no CoopLab tables" in listed.stderr
    finally:
        worker.kill()
    upgrade(settings.resolved_database_url)  # a new, empty database at the same place
    refused, _ = cli("worker")
    assert refused.returncode == 1
    assert f"(database id {database_id} at sqlite:///" in refused.stderr and "not this one (database id " in refused.stderr
