"""An artifact store outage costs a run nothing but waiting: the suite's kind of SeaweedFS server (one of
this module's own) killed in the middle of a real run and started again, and a run started while it is
down. Training goes on meanwhile, the job notes "store unreachable" on its run (the dashboard shows it)
and clears the note when the store answers; every checkpoint kept is stored whole. (An outage longer
than ``COOPLAB_STORE_OUTAGE_S`` fails the run naming the store: ``test_jobs_store_s3.py``.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from db import states
from jobs.artifacts import open_store
from jobs.artifacts.location import checkpoint_key, checkpoints_key
from jobs.executor import execute_run, run_output_dir
from tests.artifacts.conftest import _binary, new_bucket
from tests.artifacts.fake_training import FakeTraining
from tests.artifacts.job_env import use_s3
from tests.artifacts.seaweed import SeaweedServer
from tests.jobs.helpers import tiny_config, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A server of this module's own (the tests kill it), started once."""
    server = SeaweedServer(_binary(), tmp_path_factory.mktemp("seaweedfs-outage"))
    server.start()
    yield server
    server.stop()


def _stored_whole(settings, run_id: int, steps: list[int]) -> None:
    artifacts = open_store(settings)
    assert [m.key for m in artifacts.list_complete(checkpoints_key(run_id))] == [
        checkpoint_key(run_id, s) for s in sorted(steps, reverse=True)]
    for step in steps:
        assert artifacts.verify(checkpoint_key(run_id, step)) == []


def test_the_store_killed_and_restarted_mid_run_costs_the_run_nothing(jobs_env, store, experiment_id, server,
                                                                     monkeypatch):
    monkeypatch.setenv("COOPLAB_STORE_OUTAGE_S", "120")
    settings = use_s3(monkeypatch, server, new_bucket(server))
    steps = 16
    run = store.create_run(experiment_id, tiny_config(steps, checkpoint_total_limit=2), "cpu")
    result: list[str] = []
    job = threading.Thread(target=lambda: result.append(execute_run(run.id, settings=settings, store=store)))
    job.start()
    try:
        wait_for(lambda: store.get_run(run.id).step >= 3 or not job.is_alive(), 120, "step 3", interval=0.05)
        server.stop()
        killed_at, step_at_kill = time.monotonic(), store.get_run(run.id).step
        wait_for(lambda: run.id in store.store_outages() or not job.is_alive(), 60, "the outage to be noted", interval=0.05)
        noted = store.store_outages()[run.id]
        print(f"\nkilled at step {step_at_kill}; noted after {time.monotonic() - killed_at:.1f} s: {noted.problem}")
        assert f"at {server.endpoint} failed" in noted.problem
        wait_for(lambda: store.get_run(run.id).step >= step_at_kill + 3 or not job.is_alive(), 120, "3 more steps", interval=0.05)
        assert store.get_run(run.id).status == states.RUNNING  # training went on without the store
        down_s = time.monotonic() - killed_at
        server.start()
        print(f"down {down_s:.1f} s, {store.get_run(run.id).step - step_at_kill} steps trained meanwhile; "
              f"back after {time.monotonic() - killed_at:.1f} s")
    finally:
        job.join(timeout=300)
    ended = store.get_run(run.id)
    print(f"{ended.status} at step {ended.step}, {time.monotonic() - killed_at:.1f} s after the kill")
    assert result == [states.SUCCEEDED], ended.error
    assert ended.step == steps and store.store_outages() == {}
    rows = store.list_checkpoints(run.id)
    assert [r.step for r in rows] == [steps - 1, steps] and all(r.artifact_url for r in rows)
    _stored_whole(settings, run.id, [steps - 1, steps])
    assert not list((run_output_dir(settings, run.id) / "checkpoints").glob(".tmp-*"))


def test_a_run_started_while_the_store_is_down_waits_for_it(jobs_env, store, experiment_id, server, monkeypatch):
    monkeypatch.setenv("COOPLAB_STORE_OUTAGE_S", "120")
    settings = use_s3(monkeypatch, server, new_bucket(server))
    server.stop()
    run = store.create_run(experiment_id, tiny_config(), "cpu")

    def restart(step: int) -> None:
        if step == 1:  # its first checkpoint waits for the store
            wait_for(lambda: run.id in store.store_outages(), 60, "the outage to be noted", interval=0.05)
            server.start()

    try:
        status = execute_run(run.id, settings=settings, store=store, train_fn=FakeTraining(range(1, 4), between=restart))
    finally:
        if server.proc is None:
            server.start()
    assert status == states.SUCCEEDED, store.get_run(run.id).error
    assert [(r.step, bool(r.artifact_url)) for r in store.list_checkpoints(run.id)] == [(1, True), (2, True), (3, True)]
    _stored_whole(settings, run.id, [1, 2, 3])
    assert store.store_outages() == {}
    assert not list(Path(run_output_dir(settings, run.id), "checkpoints").glob(".tmp-*"))
