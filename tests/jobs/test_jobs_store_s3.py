"""The job's side of the artifact store on a real S3-compatible server (SeaweedFS): checkpoints stored
and recorded, the store down at upload for longer than ``COOPLAB_STORE_OUTAGE_S`` (the run fails naming
it and the outage, no row points at a missing object; a shorter outage: ``test_jobs_store_outage.py``),
the store down when a resumed attempt downloads (the attempt fails naming it; the next one resumes),
and the worker's start-up check (wrong credentials and a missing bucket refused in one line, or the
bucket created when asked)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from db import states
from jobs.artifacts import open_store
from jobs.artifacts.location import checkpoint_key
from jobs.executor import execute_run, run_output_dir
from tests.artifacts.conftest import (  # noqa: F401 (fixtures)
    new_bucket,
    private_s3_server,
    s3_client,
    s3_server,
    stoppable_s3_server,
)
from tests.artifacts.fake_training import FakeTraining, payload
from tests.artifacts.job_env import use_s3
from tests.jobs.helpers import ROOT, tiny_config

pytestmark = pytest.mark.integration


def test_checkpoints_are_stored_in_the_bucket_and_recorded(jobs_env, store, experiment_id, s3_server,  # noqa: F811
                                                           monkeypatch):
    settings = use_s3(monkeypatch, s3_server, new_bucket(s3_server))
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(run.id, settings=settings, store=store, train_fn=FakeTraining(range(1, 4), limit=2)) == \
        states.SUCCEEDED
    artifacts = open_store(settings)
    rows = store.list_checkpoints(run.id)
    assert [(r.step, r.artifact_url) for r in rows] == [
        (s, f"{settings.artifacts_url}/{checkpoint_key(run.id, s)}") for s in (2, 3)]
    assert [m.name for m in artifacts.list_complete(f"runs/run-{run.id}/checkpoints")] == [
        "checkpoint-3", "checkpoint-2"]
    assert all(artifacts.verify(checkpoint_key(run.id, s)) == [] for s in (2, 3))


def test_the_store_down_at_upload_fails_the_run_naming_it(jobs_env, store, experiment_id, private_s3_server,  # noqa: F811
                                                          monkeypatch):
    server = private_s3_server
    monkeypatch.setenv("COOPLAB_STORE_OUTAGE_S", "1")  # an outage longer than the job may wait
    settings = use_s3(monkeypatch, server, new_bucket(server))

    def stop_the_server(step: int) -> None:
        if step == 1:  # once checkpoint 1 is stored
            deadline = time.monotonic() + 30
            while store.list_checkpoints(run.id)[0].artifact_url is None and time.monotonic() < deadline:
                time.sleep(0.05)
            server.stop()

    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(run.id, settings=settings, store=store,
                       train_fn=FakeTraining(range(1, 4), between=stop_the_server)) == states.FAILED
    first_line = store.get_run(run.id).error.splitlines()[0]
    print("\nreason:", first_line)
    assert first_line.startswith(f"CheckpointUploadFailed: checkpoint 2 of run {run.id} could not be stored in "
                                 f"{settings.artifacts_url}/runs/run-{run.id}/checkpoints/checkpoint-2"), first_line
    assert "the artifact store was unreachable for 1 s (COOPLAB_STORE_OUTAGE_S=1) while storing checkpoint 2: " \
        f"artifact store {settings.artifacts_url} at {server.endpoint} failed " in first_line, first_line
    assert "after 3 tries: EndpointConnectionError" in first_line
    rows = store.list_checkpoints(run.id)
    assert rows[0].artifact_url is not None and all(r.artifact_url is None for r in rows[1:])

    server.start()  # every recorded URL leads to a whole copy; the half-sent one is not offered
    artifacts = open_store(settings)
    for row in rows:
        if row.artifact_url:
            assert artifacts.verify(checkpoint_key(run.id, row.step)) == []
    assert [m.name for m in artifacts.list_complete(f"runs/run-{run.id}/checkpoints")] == ["checkpoint-1"]


def test_the_store_down_when_a_resumed_attempt_downloads_fails_it_and_the_next_one_resumes(
        jobs_env, store, experiment_id, private_s3_server, monkeypatch, tmp_path):  # noqa: F811
    server = private_s3_server
    settings = use_s3(monkeypatch, server, new_bucket(server))
    first = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(first.id, settings=settings, store=store, train_fn=FakeTraining(range(1, 3))) == \
        states.SUCCEEDED
    shutil.rmtree(run_output_dir(settings, first.id))  # machine A's disk is gone
    machine_b = settings.model_copy(update={"home": tmp_path / "home-b",
                                            "database_url": settings.resolved_database_url})
    machine_b.ensure_dirs()

    server.stop()
    second = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=first.id)
    training = FakeTraining(range(3, 4))
    assert execute_run(second.id, settings=machine_b, store=store, train_fn=training) == states.FAILED
    first_line = store.get_run(second.id).error.splitlines()[0]
    print("\nreason:", first_line)
    assert first_line.startswith(f"StoreUnavailable: artifact store {settings.artifacts_url} at {server.endpoint} "
                                 f"failed "), first_line
    assert training.resumed_from is None  # it never trained
    cache = machine_b.artifacts_cache_dir / checkpoint_key(first.id, 2)
    leftovers = list(cache.parent.iterdir()) if cache.parent.exists() else []
    assert leftovers == []  # nothing half-written is left to be used

    server.start()
    third = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=second.id)
    training = FakeTraining(range(3, 4))
    assert execute_run(third.id, settings=machine_b, store=store, train_fn=training) == states.SUCCEEDED
    assert training.resumed_from == str(cache) and training.resumed_bytes == payload(2)


def _worker(tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    out = (tmp_path / f"{name}.log").open("wb")
    return subprocess.Popen([sys.executable, "-m", "cooplab", "worker", "--name", name], cwd=ROOT, env=env,
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _refused(tmp_path: Path, name: str) -> str:
    proc = _worker(tmp_path, name)
    try:
        assert proc.wait(timeout=120) == 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    lines = [line for line in (tmp_path / f"{name}.log").read_text().splitlines() if line.strip()]
    return lines[-1]


def test_the_worker_refuses_a_store_it_cannot_use_in_one_line_or_creates_the_bucket(
        jobs_env, s3_server, monkeypatch, tmp_path):  # noqa: F811
    bucket = new_bucket(s3_server)
    use_s3(monkeypatch, s3_server, bucket, secret="not-the-secret", tries=1)
    line = _refused(tmp_path, "wrong-secret")
    print("\nwrong credentials:", line)
    assert line.startswith(f"error: artifact store s3://{bucket}/lab at {s3_server.endpoint} refused the "
                           "credentials"), line

    missing = f"cooplab-missing-{os.getpid()}"
    use_s3(monkeypatch, s3_server, missing, tries=1)
    line = _refused(tmp_path, "no-bucket")
    print("missing bucket:", line)
    assert line.startswith("error: artifact store") and f"the bucket {missing} does not exist" in line, line
    assert "COOPLAB_ARTIFACTS_CREATE_BUCKET" in line

    monkeypatch.setenv("COOPLAB_ARTIFACTS_CREATE_BUCKET", "true")
    # it runs no job: without the engine's preload (torch, transformers: about 9 s of CPU) it is ready sooner;
    # the store is checked before the preload either way
    monkeypatch.setenv("COOPLAB_WORKER_PRELOAD", "false")
    proc = _worker(tmp_path, "creates")
    try:
        deadline = time.monotonic() + 120
        while " ready." not in (tmp_path / "creates.log").read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "creates.log").read_text()
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=30)
    s3_client(s3_server).head_bucket(Bucket=missing)
