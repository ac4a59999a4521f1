"""The real engine's checkpoints stored in a real S3 server (SeaweedFS) while it prunes them every step:
``checkpoint_interval: 1`` with ``checkpoint_total_limit: 2``. The trainer removes an old folder while
the upload thread may still be reading it; that must never fail the run, and what the store keeps must
be whole."""

from __future__ import annotations

import time

import pytest

from db import states
from jobs.artifacts import open_store
from jobs.artifacts.location import checkpoint_key, checkpoints_key
from jobs.executor import execute_run, run_output_dir
from tests.artifacts.conftest import new_bucket, s3_server  # noqa: F401 (fixtures)
from tests.artifacts.job_env import use_s3
from tests.jobs.helpers import tiny_config

pytestmark = pytest.mark.integration

STEPS = 40  # before uploads held their own links, 3 of 3 such runs failed, at checkpoints 9, 9 and 15 (20 steps: 0 of 1)


def test_pruning_every_step_never_fails_an_upload(jobs_env, store, experiment_id, s3_server,  # noqa: F811
                                                  monkeypatch):
    settings = use_s3(monkeypatch, s3_server, new_bucket(s3_server))
    run = store.create_run(experiment_id, tiny_config(STEPS, checkpoint_total_limit=2), "cpu")
    started = time.monotonic()
    status = execute_run(run.id, settings=settings, store=store)
    print(f"\n{STEPS} steps in {time.monotonic() - started:.1f} s: {status}")
    assert status == states.SUCCEEDED, store.get_run(run.id).error
    rows = store.list_checkpoints(run.id)
    assert [r.step for r in rows] == [STEPS - 1, STEPS]
    artifacts = open_store(settings)
    stored = [m.key for m in artifacts.list_complete(checkpoints_key(run.id))]
    assert stored == [checkpoint_key(run.id, STEPS), checkpoint_key(run.id, STEPS - 1)]
    for row in rows:
        assert row.artifact_url == f"{artifacts.url}/{checkpoint_key(run.id, row.step)}"
        assert artifacts.verify(checkpoint_key(run.id, row.step)) == []
    folder = run_output_dir(settings, run.id) / "checkpoints"
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("checkpoint-")) == [
        f"checkpoint-{STEPS - 1}", f"checkpoint-{STEPS}"]
    assert not list(folder.glob(".tmp-*"))  # the uploads' links are gone
