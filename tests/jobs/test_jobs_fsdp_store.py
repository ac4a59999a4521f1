"""An fsdp run's job (:func:`jobs.executor.execute_run`, in this process; its two gloo ranks under torchrun
as in a worker, rank 0 writing the steps to the real SQLite store) succeeds with rank 0's metrics (the
whole step's), transcripts and checkpoints; the checkpoints go to a shared artifact store (``file://``):
rank 0 uploads each checkpoint folder (every rank's shards) as it is written and the row gets its
``artifact_url`` once the copy is complete and checked; a resumed attempt on another data directory
downloads the newest one and goes on from it on one rank (as a GPU worker's fsdp runs have: DCP
reads the two ranks' shards whole). (A worker's fsdp runs that stop, freeze or
lose their job: tests/jobs/test_jobs_fsdp.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from db import states
from jobs.artifacts import open_store
from jobs.artifacts.location import checkpoint_key
from jobs.executor import execute_run, run_output_dir
from jobs.settings import Settings
from tests.jobs.test_jobs_fsdp import fsdp_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_an_fsdp_job_succeeds_and_its_sharded_checkpoints_resume_from_the_store_elsewhere(
        jobs_env, store, experiment_id, tmp_path, monkeypatch):
    folder = tmp_path / "shared-store"
    folder.mkdir()
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"file://{folder}")  # the ranks read it too
    monkeypatch.setenv("COOPLAB_COLLECTIVE_TIMEOUT_S", "60")
    shared = Settings()
    run = store.create_run(experiment_id, fsdp_config(2), "cpu")
    assert execute_run(run.id, settings=shared, store=store) == states.SUCCEEDED, store.get_run(run.id).error
    assert store.get_run(run.id).step == 2
    assert list(store.series(run.id, "train/reward_mean").xs) == [1, 2]
    assert list(store.series(run.id, "perf/ranks").ys) == [2.0, 2.0]
    assert store.episodes(run.id, split="train"), "no transcripts stored"
    log = Path(store.get_run(run.id).log_path).read_text(encoding="utf-8")
    assert "[rank 1] " in log and "[rank 0] completed: step 2" in log

    artifacts = open_store(shared)
    rows = store.list_checkpoints(run.id)
    assert [r.step for r in rows] == [1, 2]
    for row in rows:
        assert row.artifact_url == f"{artifacts.url}/{checkpoint_key(run.id, row.step)}"
        assert artifacts.verify(checkpoint_key(run.id, row.step)) == []
    stored = Path(folder) / checkpoint_key(run.id, 2)
    assert {p.name for p in (stored / "dcp").iterdir()} >= {".metadata", "__0_0.distcp", "__1_0.distcp"}

    # another machine: its own data directory, the same database and store; the checkpoint is downloaded
    shutil.rmtree(run_output_dir(shared, run.id))  # not on this "machine": only the stored copy is left
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home-b"))
    monkeypatch.setenv("COOPLAB_DATABASE_URL", shared.resolved_database_url)
    machine_b = Settings()
    machine_b.ensure_dirs()
    one_rank = fsdp_config(3)
    one_rank["trainer"]["fsdp_ranks"] = 1  # a launch of one rank: the shards of two read whole
    resumed = store.create_run(experiment_id, one_rank, "cpu", resumed_from=run.id)
    assert execute_run(resumed.id, settings=machine_b, store=store) == states.SUCCEEDED, store.get_run(resumed.id).error
    assert list(store.series(resumed.id, "train/reward_mean").xs) == [3]
    assert list(store.series(resumed.id, "perf/ranks").ys) == [1.0]
    log = Path(store.get_run(resumed.id).log_path).read_text(encoding="utf-8")
    assert str(machine_b.artifacts_cache_dir / checkpoint_key(run.id, 2)) in log  # the ranks' argument
