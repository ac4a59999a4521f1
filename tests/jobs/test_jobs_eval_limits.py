"""A queued evaluation fits the same resource budget as a run (``COOPLAB_MAX_*``: samples per item,
items, tokens), checked when it is queued (``jobs.eval_queue.queue_evaluation``: the CLI's
``--queue``, the dashboard's Evaluate) and again by the worker; and no more than
``COOPLAB_MAX_QUEUED_EVALUATIONS_PER_RUN`` of a run, ``COOPLAB_MAX_QUEUED_EVALUATIONS`` of all runs,
wait or run at once. A refusal names the size, the limit and the setting, and stores nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cooplab.cli import app
from db.eval_request_store import EvalRequestStore
from db.evaluation_store import EvaluationStore
from db.store import Store
from jobs.eval_job import execute_evaluation
from jobs.eval_queue import EvalOptions, EvalRequestError, queue_evaluation
from jobs.settings import Settings
from tests.jobs.helpers import tiny_config


def _finished_run(store: Store, experiment_id: int, **trainer: object) -> int:
    """A succeeded run of two tiny agents (8 new tokens each, one turn) with a checkpoint at step 2."""
    run = store.create_run(experiment_id, tiny_config(max_steps=2, **trainer), "cpu", total_steps=2)
    for state in ("starting", "running", "succeeded"):
        store.transition(run.id, state)
    store.add_checkpoint(run.id, 2, "/nowhere/checkpoints/checkpoint-2")
    return run.id


@pytest.fixture
def run_id(store: Store, experiment_id: int) -> int:
    return _finished_run(store, experiment_id)


def _sent(settings: Settings) -> int:
    return len(list((settings.broker_dir / "in").glob("*")))


def _refused(run_id: int, options: EvalOptions, settings: Settings, store: Store) -> str:
    with pytest.raises(EvalRequestError) as refused:
        queue_evaluation(run_id, options=options, settings=settings, store=store)
    return str(refused.value)


@pytest.mark.parametrize(("options", "size", "setting"), [
    (EvalOptions(samples=1024), "--samples: asks for 1,024 samples per item", "COOPLAB_MAX_SAMPLES_PER_NODE"),
    (EvalOptions(items=10**9, greedy=True), "--items: asks for 1,000,000,000 evaluation items",
     "COOPLAB_MAX_EVAL_SAMPLES"),
])
def test_an_evaluation_over_the_budget_is_refused_and_nothing_is_stored(jobs_env, store, run_id, monkeypatch,
                                                                         options, size, setting) -> None:
    monkeypatch.setenv("COOPLAB_MAX_SAMPLES_PER_NODE", "2")
    monkeypatch.setenv("COOPLAB_MAX_EVAL_SAMPLES", "2")
    message = _refused(run_id, options, Settings(), store)
    assert size in message and "over the limit of 2" in message and setting in message, message
    assert EvalRequestStore(store).list_for_run(run_id) == [] and _sent(jobs_env) == 0


def test_the_tokens_of_an_evaluation_are_counted(jobs_env, store, run_id, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_TOKENS_PER_STEP", "100")
    settings = Settings()
    # 4 items x 2 samples x 2 agents x 1 turn x 8 max_new_tokens = 128 tokens
    message = _refused(run_id, EvalOptions(items=4, samples=2), settings, store)
    assert "= 128 tokens, over the limit of 100" in message and "COOPLAB_MAX_TOKENS_PER_STEP" in message, message
    assert EvalRequestStore(store).list_for_run(run_id) == []
    queue_evaluation(run_id, options=EvalOptions(items=3, samples=2), settings=settings, store=store)  # 96
    queue_evaluation(run_id, options=EvalOptions(items=4, samples=50, greedy=True), settings=settings,
                     store=store)  # greedy: one answer per item, 64 tokens


def test_the_run_configs_samples_per_item_count_when_none_are_given(jobs_env, store, experiment_id,
                                                                     monkeypatch) -> None:
    run_id = _finished_run(store, experiment_id, eval_samples_per_item=8)
    monkeypatch.setenv("COOPLAB_MAX_SAMPLES_PER_NODE", "4")
    message = _refused(run_id, EvalOptions(), Settings(), store)
    assert "trainer.eval_samples_per_item" in message and "8 samples per item" in message, message


def test_the_worker_checks_the_budget_again(jobs_env, store, run_id, monkeypatch) -> None:
    requests = EvalRequestStore(store)
    queued = queue_evaluation(run_id, options=EvalOptions(samples=8), settings=jobs_env, store=store)
    stored = requests.create(run_id, checkpoint="last", queue="cpu",  # written past the queue's check
                             options={"samples": 1000, "items": 10**9})
    monkeypatch.setenv("COOPLAB_MAX_SAMPLES_PER_NODE", "4")  # the worker's own settings are tighter
    for request, size in ((queued, "8 samples per item"), (stored, "1,000 samples per item")):
        assert execute_evaluation(request.id, settings=Settings(), store=store) == "failed"
        error = requests.get(request.id).error
        assert size in error and "COOPLAB_MAX_SAMPLES_PER_NODE" in error and "\n" not in error, error
    assert EvaluationStore(store).list_evaluations(run_id) == []


def test_the_next_queued_evaluation_of_a_run_over_its_limit_is_refused(jobs_env, store, run_id,
                                                                        monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_QUEUED_EVALUATIONS_PER_RUN", "2")
    settings = Settings()
    requests = EvalRequestStore(store)
    first, _ = (queue_evaluation(run_id, options=EvalOptions(greedy=True), settings=settings, store=store)
                for _ in range(2))
    requests.claim(first.id)  # running counts too
    message = _refused(run_id, EvalOptions(greedy=True), settings, store)
    assert f"run {run_id} already has 2 evaluations queued or running" in message, message
    assert "limit of 2" in message and "COOPLAB_MAX_QUEUED_EVALUATIONS_PER_RUN" in message
    assert len(requests.list_for_run(run_id)) == 2 and _sent(jobs_env) == 2  # nothing stored, nothing sent
    requests.finish(first.id, "done")  # one ended: room for one more
    queue_evaluation(run_id, options=EvalOptions(greedy=True), settings=settings, store=store)
    assert len(requests.list_for_run(run_id)) == 3


def test_the_next_queued_evaluation_over_the_global_limit_is_refused(jobs_env, store, experiment_id,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_QUEUED_EVALUATIONS", "3")
    settings = Settings()
    first, second = _finished_run(store, experiment_id), _finished_run(store, experiment_id)
    for run_id in (first, first, second):
        queue_evaluation(run_id, options=EvalOptions(greedy=True), settings=settings, store=store)
    message = _refused(second, EvalOptions(greedy=True), settings, store)
    assert "3 evaluations of all runs are queued or running" in message, message
    assert "limit of 3" in message and "COOPLAB_MAX_QUEUED_EVALUATIONS " in message + " "
    assert len(EvalRequestStore(store).list_for_run(second)) == 1 and _sent(jobs_env) == 3


def test_the_cli_refuses_an_over_budget_queued_evaluation(jobs_env, store, run_id, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_SAMPLES_PER_NODE", "2")
    result = CliRunner().invoke(app, ["eval", str(run_id), "--queue", "--samples", "1024"])
    assert result.exit_code == 2, result.output
    assert "1,024 samples per item" in result.output and "COOPLAB_MAX_SAMPLES_PER_NODE" in result.output
    assert EvalRequestStore(store).list_for_run(run_id) == [] and _sent(jobs_env) == 0

