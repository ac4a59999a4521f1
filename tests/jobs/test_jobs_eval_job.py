"""The evaluation job: a queued request is checked and sent, a job evaluates it with the engine's own
code and stores the records (a team analysis as one record per variant), ending ``done`` with their
ids or ``failed`` with one line; a redelivered message evaluates nothing twice; bad requests are refused
before anything is stored; and on a real ``cooplab worker`` an evaluation queued after a run is
evaluated and stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from db.eval_request_store import EvalRequestStore
from db.evaluation_store import EvaluationStore
from engine.build.run import run_training
from engine.evaluation.evaluate import evaluate_run, find_checkpoint
from engine.schema.run_config import parse_run_config
from engine.sinks import NullSink
from jobs.client import BrokerUnavailable, submit_run
from jobs.eval_job import execute_evaluation
from jobs.eval_queue import EvalOptions, EvalRequestError, queue_evaluation
from jobs.settings import Settings
from tests.jobs.helpers import START_TIMEOUT_S, tiny_config, wait_for, wait_until_final


def _config(max_steps: int = 2) -> dict:
    config = tiny_config(max_steps=max_steps)
    config["task"]["params"]["eval_items"] = 2
    return config


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("eval-job") / "run"
    assert run_training(parse_run_config(_config()), output_dir=folder, sink=NullSink()).status == "completed"
    return folder


@pytest.fixture
def run_id(store, experiment_id, trained, tmp_path) -> int:
    """A finished run in the database whose folder (a copy of ``trained``) holds checkpoints 1 and 2."""
    folder = tmp_path / "run"
    shutil.copytree(trained, folder)
    run = store.create_run(experiment_id, _config(), "cpu", total_steps=2)
    for state in ("starting", "running", "succeeded"):
        store.transition(run.id, state)
    store.update_run(run.id, output_dir=str(folder))
    for step in (1, 2):
        store.add_checkpoint(run.id, step, str(folder / "checkpoints" / f"checkpoint-{step}"))
    return run.id


def test_a_queued_evaluation_is_executed_once_and_stored(jobs_env: Settings, store, run_id) -> None:
    request = queue_evaluation(run_id, checkpoint="2", options=EvalOptions(greedy=True), settings=jobs_env,
                               store=store)
    assert (request.status, request.checkpoint, request.queue) == ("queued", "2", "cpu")
    sent = [json.loads(p.read_text()) for p in (jobs_env.broker_dir / "in").glob("*")]
    assert any(m["headers"]["task"] == "jobs.run_evaluation" and m["headers"]["id"] == request.celery_task_id
               for m in sent), sent

    assert execute_evaluation(request.id, settings=jobs_env, store=store, worker="w1") == "done"
    done = EvalRequestStore(store).get(request.id)
    assert done.status == "done" and done.worker == "w1" and done.error is None and len(done.evaluation_ids) == 1
    stored = EvaluationStore(store).get_evaluation(done.evaluation_ids[0])
    folder = Path(store.get_run(run_id).output_dir)
    expected = evaluate_run(parse_run_config(_config()), checkpoint=find_checkpoint(folder, 2), greedy=True)
    assert stored.checkpoint_step == 2 and stored.split == "eval" and stored.kind == "eval"
    assert dict(stored.metrics) == expected.metrics  # greedy: exactly what `cooplab eval` measures
    assert [dict(i) for i in stored.per_item] == expected.per_item and len(stored.episodes) == 2
    assert stored.settings == {"seed": expected.seed, "greedy": True, "samples": 1, "items": 2}

    # a redelivered message evaluates nothing again
    assert execute_evaluation(request.id, settings=jobs_env, store=store) == "done"
    assert len(EvaluationStore(store).list_evaluations(run_id)) == 1


def test_a_queued_team_analysis_stores_one_record_per_variant(jobs_env: Settings, store, run_id) -> None:
    request = queue_evaluation(run_id, options=EvalOptions(greedy=True, items=1, team_analysis=True),
                               settings=jobs_env, store=store)
    assert execute_evaluation(request.id, settings=jobs_env, store=store) == "done"
    rows = EvaluationStore(store).list_evaluations(run_id)
    assert [r.id for r in rows] == list(EvalRequestStore(store).get(request.id).evaluation_ids)
    assert [r.label for r in rows] == ["trained", "base", "first reset", "second reset", "roles swapped"]
    assert {r.kind for r in rows} == {"team_analysis"} and len({r.analysis for r in rows}) == 1
    assert all(r.checkpoint_step == 2 for r in rows)


def test_a_request_the_job_cannot_evaluate_fails_with_one_line(jobs_env: Settings, store, run_id) -> None:
    folder = Path(store.get_run(run_id).output_dir)
    request = queue_evaluation(run_id, checkpoint=1, settings=jobs_env, store=store)
    shutil.rmtree(folder / "checkpoints" / "checkpoint-1")  # gone from disk after it was queued
    assert execute_evaluation(request.id, settings=jobs_env, store=store) == "failed"
    failed = EvalRequestStore(store).get(request.id)
    assert "no checkpoint at that step; it has steps 2" in failed.error and "\n" not in failed.error
    assert failed.evaluation_ids == () and EvaluationStore(store).list_evaluations(run_id) == []


@pytest.mark.parametrize("checkpoint, options, message", [
    ("7", EvalOptions(), "--checkpoint 7: run {run} has no checkpoint at that step; it has steps 1, 2"),
    ("first", EvalOptions(), "--checkpoint 'first': give 'last', 'best' or a step number"),
    ("best", EvalOptions(), "run {run} keeps no best checkpoint"),
    ("last", EvalOptions(samples=0), "--samples 0: give from 1 to 1024 joint answer(s) per item"),
    ("last", EvalOptions(items=0), "--items 0: give at least 1"),
    ("last", EvalOptions(split="test"), "--split 'test': choose one of eval, train"),
    ("last", EvalOptions(team_analysis=True, metric="train/reward_mean"), "--metric 'train/reward_mean'"),
])
def test_bad_requests_are_refused_naming_them(jobs_env: Settings, store, run_id, checkpoint, options,
                                              message) -> None:
    with pytest.raises(EvalRequestError) as refused:
        queue_evaluation(run_id, checkpoint=checkpoint, options=options, settings=jobs_env, store=store)
    assert message.format(run=run_id) in str(refused.value)
    assert EvalRequestStore(store).list_for_run(run_id) == []  # nothing stored


def test_unknown_runs_and_runs_without_checkpoints_are_refused(jobs_env: Settings, store, experiment_id) -> None:
    with pytest.raises(EvalRequestError, match="no run 4242 in the database"):
        queue_evaluation(4242, settings=jobs_env, store=store)
    fresh = store.create_run(experiment_id, _config(), "cpu").id
    with pytest.raises(EvalRequestError, match=f"run {fresh} has no checkpoints yet \\(it is queued\\)"):
        queue_evaluation(fresh, settings=jobs_env, store=store)


def test_a_broker_that_is_down_fails_the_request(jobs_env: Settings, store, run_id, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_BROKER_URL", "redis://127.0.0.1:1/0")
    with pytest.raises(BrokerUnavailable, match="could not send evaluation request"):
        queue_evaluation(run_id, settings=Settings(), store=store)
    (request,) = EvalRequestStore(store).list_for_run(run_id)
    assert request.status == "failed" and "could not send evaluation request" in request.error


@pytest.mark.integration
@pytest.mark.slow
def test_an_evaluation_runs_on_a_real_worker(jobs_env: Settings, store, experiment_id, start_worker) -> None:
    worker = start_worker()
    run_id = submit_run(_config(), experiment_id=experiment_id, settings=jobs_env)
    wait_until_final(store, run_id, START_TIMEOUT_S)
    assert store.get_run(run_id).status == "succeeded", store.get_run(run_id).error
    request = queue_evaluation(run_id, options=EvalOptions(greedy=True), settings=jobs_env, store=store)
    requests = EvalRequestStore(store)
    wait_for(lambda: requests.get(request.id).is_final, START_TIMEOUT_S, f"evaluation request {request.id} to end")
    done = requests.get(request.id)
    assert done.status == "done", f"{done.error}\n{worker.log()[-3000:]}"
    assert done.worker and done.worker.startswith("cooplab-cpu-")
    (stored,) = EvaluationStore(store).list_evaluations(run_id)
    assert stored.id == done.evaluation_ids[0] and stored.checkpoint_step == 2 and stored.split == "eval"
    assert "eval/reward_mean" in stored.metrics and len(stored.per_item) == 2


def test_a_claim_is_tried_again_while_the_database_is_locked() -> None:
    from sqlalchemy.exc import OperationalError

    from jobs.eval_job import _claim_through_outage

    class Locked:
        def __init__(self, failures: int) -> None:
            self.failures, self.calls = failures, 0

        def claim(self, request_id, *, worker=None):
            self.calls += 1
            if self.calls <= self.failures:
                raise OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))
            return ("claimed", request_id, worker)

    pauses: list[float] = []
    requests = Locked(failures=3)
    assert _claim_through_outage(requests, 7, "w", 60.0, sleep=pauses.append) == ("claimed", 7, "w")
    assert requests.calls == 4 and pauses == [0.5, 1.0, 2.0]
    always = Locked(failures=10_000)
    import pytest

    with pytest.raises(OperationalError):
        _claim_through_outage(always, 7, "w", 2.0, sleep=pauses.append)


# ------------------------------------------------------------- a run trained on another machine


def _stored_elsewhere(store, run_id: int, settings: Settings, steps: tuple[int, ...]) -> None:
    """Upload the run's checkpoints at ``steps`` to ``settings``' store as its job would (the others'
    uploads never completed), then remove its folder: the run was trained on another machine."""
    from jobs.artifacts import open_store
    from jobs.artifacts.location import checkpoint_key

    artifacts = open_store(settings)
    for row in store.list_checkpoints(run_id):
        if row.step not in steps:
            continue
        artifacts.upload_folder(row.path, checkpoint_key(run_id, row.step))
        assert store.set_checkpoint_artifact(run_id, row.id, f"{artifacts.url}/{checkpoint_key(run_id, row.step)}")
    shutil.rmtree(store.get_run(run_id).output_dir)


def test_a_run_trained_on_another_machine_is_evaluated_from_the_artifact_store(
        jobs_env: Settings, store, run_id, trained, tmp_path, monkeypatch) -> None:
    shared = tmp_path / "shared-store"
    shared.mkdir()
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"file://{shared}")
    settings = Settings()
    _stored_elsewhere(store, run_id, settings, steps=(2,))
    requests = EvalRequestStore(store)

    request = queue_evaluation(run_id, checkpoint="last", options=EvalOptions(greedy=True), settings=settings,
                               store=store)
    assert execute_evaluation(request.id, settings=settings, store=store) == "done", requests.get(request.id).error
    (evaluation_id,) = requests.get(request.id).evaluation_ids
    stored = EvaluationStore(store).get_evaluation(evaluation_id)
    expected = evaluate_run(parse_run_config(_config()), checkpoint=find_checkpoint(trained, 2), greedy=True)
    assert stored.checkpoint_step == 2 and dict(stored.metrics) == expected.metrics
    cached = settings.artifacts_cache_dir / "runs" / f"run-{run_id}" / "checkpoints" / "checkpoint-2"
    assert cached.is_dir()  # downloaded into this machine's cache

    folder = store.get_run(run_id).output_dir
    unstored = queue_evaluation(run_id, checkpoint="1", settings=settings, store=store)
    assert execute_evaluation(unstored.id, settings=settings, store=store) == "failed"
    assert requests.get(unstored.id).error == (
        f"run {run_id}'s folder ({folder}) is not on this worker's machine, and checkpoint 1 is not among the "
        f"checkpoints stored in file://{shared} (steps 2)")

    from jobs.artifacts import open_store
    from jobs.artifacts.eval_source import stored_checkpoint

    with pytest.raises(FileNotFoundError) as best:
        stored_checkpoint(store, store.get_run(run_id), "best", open_store(settings), settings.artifacts_cache_dir)
    assert str(best.value) == (
        f"run {run_id}'s folder ({folder}) is not on this worker's machine, and its best checkpoint is kept only "
        "there: evaluate it at 'last' or at a stored step (2), or on the machine that trained it")


def test_without_a_shared_store_a_run_from_another_machine_fails_naming_the_fix(jobs_env: Settings, store,
                                                                                 run_id) -> None:
    shutil.rmtree(store.get_run(run_id).output_dir)
    request = queue_evaluation(run_id, checkpoint="last", settings=jobs_env, store=store)
    assert execute_evaluation(request.id, settings=jobs_env, store=store) == "failed"
    error = EvalRequestStore(store).get(request.id).error
    assert error.startswith(f"run {run_id}'s folder (") and "is not on this worker's machine" in error
    assert "set COOPLAB_ARTIFACTS_URL to a store every worker reaches" in error
