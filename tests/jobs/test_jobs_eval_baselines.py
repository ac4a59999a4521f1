"""Test-time baselines queued with an evaluation: a real ``cooplab worker`` evaluates the trained team and
each baseline (the run's base models under the protocol) on the same held-out items with the same seed,
and stores them in one transaction, labelled by protocol; a baseline the team cannot play is refused
before anything is stored."""

from __future__ import annotations

import pytest

from db.eval_request_store import EvalRequestStore
from db.evaluation_store import EvaluationStore
from engine.build.run import run_training
from engine.evaluation.evaluate import evaluate_run
from engine.schema.run_config import parse_run_config
from engine.sinks import NullSink
from jobs.eval_queue import EvalOptions, EvalRequestError, queue_evaluation
from jobs.settings import Settings
from tests.jobs.helpers import START_TIMEOUT_S, tiny_config, wait_for


def _config() -> dict:
    config = tiny_config(max_steps=1)
    config["task"]["params"]["eval_items"] = 2
    return config


@pytest.fixture
def run_id(store, experiment_id, tmp_path) -> int:
    """A finished run in the database, trained here (one step, checkpoint 1) into its folder."""
    folder = tmp_path / "run"
    assert run_training(parse_run_config(_config()), output_dir=folder, sink=NullSink()).status == "completed"
    run = store.create_run(experiment_id, _config(), "cpu", total_steps=1)
    for state in ("starting", "running", "succeeded"):
        store.transition(run.id, state)
    store.update_run(run.id, output_dir=str(folder))
    store.add_checkpoint(run.id, 1, str(folder / "checkpoints" / "checkpoint-1"))
    return run.id


@pytest.mark.integration
def test_a_worker_stores_the_team_and_two_baselines_on_the_same_items(jobs_env: Settings, store, run_id,
                                                                       start_worker) -> None:
    worker = start_worker()
    request = queue_evaluation(run_id, options=EvalOptions(greedy=True, baselines=("parallel", "discussion")),
                               settings=jobs_env, store=store)
    assert request.options["baselines"] == ["parallel", "discussion"]
    requests = EvalRequestStore(store)
    wait_for(lambda: requests.get(request.id).is_final, START_TIMEOUT_S, f"evaluation request {request.id} to end")
    done = requests.get(request.id)
    assert done.status == "done", f"{done.error}\n{worker.log()[-3000:]}"
    team, parallel, discussion = EvaluationStore(store).list_evaluations(run_id)
    assert [e.id for e in (team, parallel, discussion)] == list(done.evaluation_ids)
    assert (team.kind, team.checkpoint_step) == ("eval", 1)
    assert [(e.kind, e.label, e.checkpoint_step) for e in (parallel, discussion)] == [
        ("baseline", "parallel", None), ("baseline", "discussion", None)]  # the base models: no checkpoint
    for baseline in (parallel, discussion):  # the same items, samples and seed as the team's
        assert {k: baseline.settings[k] for k in ("seed", "greedy", "samples", "items")} == dict(team.settings)
        assert len(baseline.per_item) == 2 and set(baseline.metrics) == set(baseline.standard_errors)
    # greedy: exactly what `cooplab eval --run-config ... --baseline parallel` measures
    local = evaluate_run(parse_run_config(_config()), greedy=True, baseline="parallel")
    assert dict(parallel.metrics) == local.metrics and dict(parallel.standard_errors) == local.standard_errors


def test_a_baseline_the_team_cannot_play_is_refused_before_anything_is_stored(jobs_env: Settings, store,
                                                                              run_id) -> None:
    with pytest.raises(EvalRequestError) as refused:
        queue_evaluation(run_id, options=EvalOptions(baselines=("single", "pipeline")), settings=jobs_env,
                         store=store)
    assert str(refused.value) == (f"--baseline single for run {run_id}: task 'quickstart' has no one-agent form "
                                  "(its team sizes are 2); leave single out of the baselines")
    assert EvalRequestStore(store).list_for_run(run_id) == []


def test_the_worker_checks_the_baselines_again(jobs_env: Settings, store, run_id) -> None:
    """A request stored with a baseline the team cannot play (by another client) fails with the same
    line on the worker, storing nothing."""
    from jobs.eval_job import execute_evaluation

    request = EvalRequestStore(store).create(run_id, checkpoint="last", queue="cpu",
                                             options=EvalOptions(baselines=("single",)).to_json())
    assert execute_evaluation(request.id, settings=jobs_env, store=store) == "failed"
    failed = EvalRequestStore(store).get(request.id)
    assert failed.error.startswith(f"--baseline single for run {run_id}: task 'quickstart' has no one-agent form")
    assert EvaluationStore(store).list_evaluations(run_id) == []
