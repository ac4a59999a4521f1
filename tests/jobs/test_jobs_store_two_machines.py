"""Two machines in one test: two real ``cooplab worker`` processes with separate data directories and
separate names (``worker-a@machine-a``, ``worker-b@machine-b``), sharing the Redis broker, one SQLite
database and a real S3 server (SeaweedFS). A run starts on worker A and is stopped; A is killed and
its data directory deleted; ``cooplab resume`` continues the run on worker B from the checkpoint in the
store, at the next step, with the same metrics as an uninterrupted run; a third data directory (where
the dashboard would run) downloads B's checkpoint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from db import states
from db.migrate import upgrade
from db.store import Store
from jobs.artifacts import open_store
from jobs.artifacts.location import checkpoint_key, checkpoints_key, export_key
from jobs.artifacts.resume import stored_key
from jobs.artifacts.run_outputs import log_object_key
from jobs.client import resume_run, stop_run, submit_run
from tests.artifacts.conftest import new_bucket, s3_server, same_tree  # noqa: F401 (fixtures)
from tests.artifacts.job_env import use_s3
from tests.jobs.helpers import ROOT, WorkerProcess, tiny_config, wait_for, wait_until_final, wait_until_step

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOT_REPRODUCIBLE = ("perf/", "time", "memory", "resources/")  # clock, memory and CPU readings differ run to run


def _start(tmp_path: Path, name: str, home: Path, started: list[WorkerProcess]) -> WorkerProcess:
    env = dict(os.environ, COOPLAB_HOME=str(home), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    log_path = tmp_path / f"{name}.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker", "--device", "cpu", "--name", name],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    worker = WorkerProcess(proc, log_path)
    started.append(worker)
    wait_for(lambda: " ready." in worker.log() or proc.poll() is not None, 90, f"worker {name} to be ready")
    assert proc.poll() is None, worker.log()
    return worker


def _series(store: Store, run_id: int) -> dict[str, dict[int, float]]:
    found = {}
    for key in store.metric_keys(run_id):
        if any(part in key for part in NOT_REPRODUCIBLE):
            continue
        series = store.series(run_id, key, max_points=100_000)
        found[key] = dict(zip(series.xs, series.ys, strict=True))
    return found


def test_a_run_stopped_on_one_machine_resumes_on_another_from_the_store(redis_env, s3_server, monkeypatch,  # noqa: F811
                                                                        tmp_path):
    database = tmp_path / "shared-db" / "cooplab.db"
    database.parent.mkdir()
    monkeypatch.setenv("COOPLAB_DATABASE_URL", f"sqlite:///{database}")
    settings = use_s3(monkeypatch, s3_server, new_bucket(s3_server))
    upgrade(settings.resolved_database_url)
    home_a, home_b, home_c = tmp_path / "machine-a", tmp_path / "machine-b", tmp_path / "machine-c"
    config = tiny_config(max_steps=7, checkpoint_total_limit=2)
    started: list[WorkerProcess] = []
    store = Store(settings.resolved_database_url)
    try:
        experiment = store.create_experiment("two-machines").id
        artifacts = open_store(settings)

        # machine A trains the run until it is stopped; its checkpoints go to the store as they are written
        worker_a = _start(tmp_path, "worker-a@machine-a", home_a, started)
        first = submit_run(config, experiment_id=experiment, settings=settings)
        wait_until_step(store, first, 3)
        stop_run(first, settings=settings)
        wait_until_final(store, first, 90)
        stopped = store.get_run(first)
        assert stopped.status == states.STOPPED, stopped.error
        assert stopped.worker == "worker-a@machine-a"
        checkpoint = store.latest_checkpoint(first)
        assert checkpoint.step == stopped.step and checkpoint.path.startswith(str(home_a))
        assert checkpoint.artifact_url == f"{settings.artifacts_url}/{checkpoint_key(first, checkpoint.step)}"
        stored = [m.name for m in artifacts.list_complete(checkpoints_key(first))]
        assert stored == [f"checkpoint-{r.step}" for r in reversed(store.list_checkpoints(first))]
        assert len(stored) == 2  # checkpoint_total_limit: the pruned ones were deleted from the store too
        wait_for(lambda: artifacts.stat(log_object_key(first)), 30, "run's log in the store")

        # machine A dies with its disk
        worker_a.kill()
        shutil.rmtree(home_a)

        # machine B resumes it from the store
        _start(tmp_path, "worker-b@machine-b", home_b, started)
        second = resume_run(first, settings=settings)
        wait_until_final(store, second, 180)
        resumed = store.get_run(second)
        assert resumed.status == states.SUCCEEDED, resumed.error
        assert resumed.worker == "worker-b@machine-b" and resumed.step == 7
        resumed_series = _series(store, second)
        assert min(resumed_series["train/reward_mean"]) == checkpoint.step + 1
        assert (home_b / "artifact-cache" / checkpoint_key(first, checkpoint.step)).is_dir()
        assert artifacts.manifest(export_key(second, "model")) is not None

        # an uninterrupted run of the same config (on B) has the same metrics, step for step
        whole = submit_run(config, experiment_id=experiment, settings=settings)
        wait_until_final(store, whole, 180)
        ended = store.get_run(whole)
        assert ended.status == states.SUCCEEDED, f"{ended.error}\n{started[-1].log()[-6000:]}"
        reference, before = _series(store, whole), _series(store, first)
        assert "train/reward_mean" in reference and len(reference) > 3, sorted(reference)
        for key, points in reference.items():
            assert {s: v for s, v in points.items() if s <= checkpoint.step} == before.get(key, {}), key
            assert {s: v for s, v in points.items() if s > checkpoint.step} == resumed_series.get(key, {}), key

        # a third data directory (the dashboard's machine) downloads B's last checkpoint
        last = store.latest_checkpoint(second)
        machine_c = settings.model_copy(update={"home": home_c})
        copy = open_store(machine_c).download_folder(stored_key(artifacts, last),
                                                     machine_c.artifacts_cache_dir / "copy")
        assert same_tree(Path(last.path), copy)
        print(f"\nrun {first} stopped at step {checkpoint.step} on machine A, run {second} resumed on B at "
              f"step {checkpoint.step + 1}; {len(reference)} metric series equal to the uninterrupted run {whole}")
    finally:
        for worker in started:
            worker.kill()
        store.close()
