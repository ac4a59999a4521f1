"""The job's side of the artifact store, in this process, with a shared-folder store (``file://``) as
a real second filesystem location: each checkpoint is uploaded after it is written, its row gets its
``artifact_url`` once the upload completed and was checked, pruning deletes the stored copy, the run's
outputs and log are stored at its end, a resumed attempt on another data directory downloads the
checkpoint, and a failed upload fails the run naming the store. With the embedded store nothing
changes. (The same on a real S3 server, with real workers and the real engine:
``test_jobs_store_s3.py``.)"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from db import states
from jobs.artifacts import open_store
from jobs.artifacts.location import checkpoint_key, checkpoints_key, export_key, iterations_key, logs_key
from jobs.executor import execute_run, run_output_dir
from jobs.settings import Settings
from tests.artifacts.fake_training import FakeTraining, payload
from tests.jobs.helpers import tiny_config


@pytest.fixture
def shared(tmp_path: Path, jobs_env: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """``jobs_env`` with a shared-folder artifact store."""
    folder = tmp_path / "shared-store"
    folder.mkdir()
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"file://{folder}")
    monkeypatch.setenv("COOPLAB_ARTIFACTS_TRIES", "2")
    monkeypatch.setenv("COOPLAB_ARTIFACTS_RETRY_BASE_S", "0.05")
    return Settings()


def _other_machine(settings: Settings, home: Path) -> Settings:
    """Another worker's settings: its own data directory, the same database and artifact store."""
    other = settings.model_copy(update={"home": home, "database_url": settings.resolved_database_url})
    other.ensure_dirs()
    return other


def test_each_checkpoint_is_stored_and_recorded_once_checked_and_pruning_deletes_the_copy(shared, store,
                                                                                           experiment_id):
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    training = FakeTraining(range(1, 5), limit=2)
    assert execute_run(run.id, settings=shared, store=store, train_fn=training) == states.SUCCEEDED

    artifacts = open_store(shared)
    rows = store.list_checkpoints(run.id)
    assert [r.step for r in rows] == [3, 4]  # the pruned rows are gone
    for row in rows:
        assert row.artifact_url == f"{artifacts.url}/{checkpoint_key(run.id, row.step)}"
        assert artifacts.verify(checkpoint_key(run.id, row.step)) == []
    stored = [m.key for m in artifacts.list_complete(checkpoints_key(run.id))]
    assert stored == [checkpoint_key(run.id, 4), checkpoint_key(run.id, 3)]  # 1 and 2 deleted from the store
    assert not list(artifacts.backend.list(checkpoint_key(run.id, 1) + "/"))

    assert artifacts.manifest(export_key(run.id, "model")) is not None
    best = artifacts.manifest(export_key(run.id, "best_checkpoint"))
    assert [f.path for f in best.files] == ["best.json", "best/model_0.safetensors"]
    assert artifacts.manifest(f"{iterations_key(run.id)}/reward_distribution") is not None
    log_text = b"".join(artifacts.stream(f"{logs_key(run.id)}/run-{run.id}.log")).decode()
    assert "checkpoint at step 4 stored" in log_text and "checkpoint(s) stored in" in log_text


def test_a_resumed_attempt_on_another_data_directory_downloads_the_newest_stored_checkpoint(
        shared, store, experiment_id, tmp_path):
    first = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(first.id, settings=shared, store=store, train_fn=FakeTraining(range(1, 4))) == states.SUCCEEDED

    # on machine A the local folder is used where it is
    on_a = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=first.id)
    training = FakeTraining(range(4, 5))
    assert execute_run(on_a.id, settings=shared, store=store, train_fn=training) == states.SUCCEEDED
    assert training.resumed_from == str(run_output_dir(shared, first.id) / "checkpoints" / "checkpoint-3")

    # A's disk is lost; machine B downloads checkpoint 3 into its own data directory
    shutil.rmtree(run_output_dir(shared, first.id))
    machine_b = _other_machine(shared, tmp_path / "home-b")
    on_b = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=first.id)
    training = FakeTraining(range(4, 6))
    assert execute_run(on_b.id, settings=machine_b, store=store, train_fn=training) == states.SUCCEEDED
    cached = machine_b.artifacts_cache_dir / checkpoint_key(first.id, 3)
    assert training.resumed_from == str(cached)
    assert training.resumed_bytes == payload(3)

    # the next attempt on B uses the cached copy as it is
    before = os.stat(cached / "model_0.safetensors").st_mtime_ns
    again = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=first.id)
    training = FakeTraining(range(4, 5))
    assert execute_run(again.id, settings=machine_b, store=store, train_fn=training) == states.SUCCEEDED
    assert training.resumed_bytes == payload(3)
    assert os.stat(cached / "model_0.safetensors").st_mtime_ns == before


def test_a_checkpoint_whose_upload_never_completed_is_not_offered(shared, store, experiment_id, tmp_path):
    first = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(first.id, settings=shared, store=store, train_fn=FakeTraining(range(1, 3))) == states.SUCCEEDED
    store.add_checkpoint(first.id, 9, str(tmp_path / "elsewhere" / "checkpoint-9"))  # never stored
    shutil.rmtree(run_output_dir(shared, first.id))
    machine_b = _other_machine(shared, tmp_path / "home-b")
    second = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=first.id)
    training = FakeTraining(range(3, 4))
    assert execute_run(second.id, settings=machine_b, store=store, train_fn=training) == states.SUCCEEDED
    assert training.resumed_bytes == payload(2)


def test_a_failed_upload_fails_the_run_naming_the_store_and_no_row_points_at_a_missing_copy(
        shared, store, experiment_id):
    root = Path(shared.artifacts_url.removeprefix("file://"))

    def break_the_store(step: int) -> None:
        if step == 1:  # once checkpoint 1 is stored, the store's folder becomes unusable
            deadline = time.monotonic() + 30
            while store.list_checkpoints(run.id)[0].artifact_url is None and time.monotonic() < deadline:
                time.sleep(0.05)
            (root / "runs").rename(root.parent / "moved-away")
            (root / "runs").write_text("not a folder")  # every later upload fails: NotADirectoryError

    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(run.id, settings=shared, store=store,
                       train_fn=FakeTraining(range(1, 4), between=break_the_store)) == states.FAILED
    failed = store.get_run(run.id)
    first_line = failed.error.splitlines()[0]
    assert first_line.startswith("CheckpointUploadFailed: checkpoint 2 of run"), first_line
    assert f"could not be stored in {shared.artifacts_url}/runs/run-{run.id}/checkpoints/checkpoint-2" in first_line
    assert "NotADirectoryError" in first_line
    urls = {r.step: r.artifact_url for r in store.list_checkpoints(run.id)}
    assert urls[1] is not None and urls[2] is None and urls.get(3) is None


def test_with_the_embedded_store_nothing_is_copied(jobs_env, store, experiment_id, tmp_path):
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store, train_fn=FakeTraining(range(1, 3))) == \
        states.SUCCEEDED
    assert [r.artifact_url for r in store.list_checkpoints(run.id)] == [None, None]
    assert not (jobs_env.data_dir / ".complete").exists()
    assert not jobs_env.artifacts_cache_dir.exists()

    shutil.rmtree(run_output_dir(jobs_env, run.id))
    machine_b = _other_machine(jobs_env, tmp_path / "home-b")
    second = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=run.id)
    assert execute_run(second.id, settings=machine_b, store=store, train_fn=FakeTraining(range(3, 4))) == \
        states.FAILED
    error = store.get_run(second.id).error.splitlines()[0]
    assert error.startswith("FileNotFoundError:") and "not on this machine" in error
    assert "COOPLAB_ARTIFACTS_URL" in error


def test_a_checkpoint_row_records_its_stored_copy_once_and_a_pruned_row_takes_none(store, experiment_id):
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    kept, pruned = store.add_checkpoint(run.id, 1, "/d/checkpoint-1"), store.add_checkpoint(run.id, 2, "/d/checkpoint-2")
    assert kept.artifact_url is None
    store.delete_checkpoints(run.id, [pruned.id])
    assert store.set_checkpoint_artifact(run.id, kept.id, "s3://lab/x/runs/run-1/checkpoints/checkpoint-1") is True
    assert store.set_checkpoint_artifact(run.id, pruned.id, "s3://lab/x/runs/run-1/checkpoints/checkpoint-2") is False
    assert [c.artifact_url for c in store.list_checkpoints(run.id)] == ["s3://lab/x/runs/run-1/checkpoints/checkpoint-1"]
    assert store.latest_checkpoint(run.id).artifact_url.endswith("checkpoint-1")
    with pytest.raises(ValueError, match="may not be empty"):
        store.set_checkpoint_artifact(run.id, kept.id, " ")
