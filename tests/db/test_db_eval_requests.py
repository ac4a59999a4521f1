"""Evaluation requests (SQLite and PostgreSQL): queued → running → done | failed by compare-and-set, a
one-line reason, stale running requests failed, removed with their run; and the evaluations read for
Compare and studies: the newest plain held-out evaluation of each run, several stored all or none."""

from __future__ import annotations

from datetime import timedelta

import pytest

from db.errors import NotFoundError
from db.eval_request_store import MAX_ERROR_CHARS, EvalRequestStore
from db.evaluation_records import EvaluationInput
from db.evaluation_store import EvaluationStore
from db.models import utcnow
from db.store import Store

OPTIONS = {"split": "eval", "items": 2, "samples": None, "greedy": True, "seed": None, "team_analysis": False,
           "metric": "eval/reward_mean"}


def test_a_request_is_claimed_once_and_ends_done_with_its_records(store: Store, run_id: int) -> None:
    requests = EvalRequestStore(store)
    request = requests.create(run_id, checkpoint="last", options=OPTIONS, queue="cpu")
    assert (request.status, request.checkpoint, dict(request.options), request.is_final) == (
        "queued", "last", OPTIONS, False)
    requests.set_task_id(request.id, "task-1")
    claimed = requests.claim(request.id, worker="w1")
    assert claimed.status == "running" and claimed.worker == "w1" and claimed.heartbeat_at is not None
    assert requests.claim(request.id, worker="w2") is None  # a redelivered message takes nothing
    assert requests.heartbeat(request.id)
    done = requests.finish(request.id, "done", evaluation_ids=[7, 8])
    assert (done.status, done.evaluation_ids, done.error, done.is_final) == ("done", (7, 8), None, True)
    assert done.celery_task_id == "task-1" and done.finished_at is not None
    assert not requests.heartbeat(request.id)
    # someone else's final state is kept
    assert requests.finish(request.id, "failed", error="late").status == "done"
    assert [r.id for r in requests.list_for_run(run_id)] == [request.id]


def test_a_failed_request_says_why_on_one_line(store: Store, run_id: int) -> None:
    requests = EvalRequestStore(store)
    request = requests.create(run_id, checkpoint="3", options=OPTIONS, queue="cpu")
    failed = requests.finish(request.id, "failed", error="no checkpoint\n  at step 3" + "x" * 2000,
                             expected_from=("queued",))
    assert failed.status == "failed" and "\n" not in failed.error and failed.error.startswith("no checkpoint at step 3")
    assert len(failed.error) == MAX_ERROR_CHARS
    with pytest.raises(ValueError, match="needs a reason"):
        requests.finish(request.id, "failed")
    with pytest.raises(ValueError, match="ends done or failed"):
        requests.finish(request.id, "running")


def test_stale_running_requests_fail_and_requests_go_with_their_run(store: Store, run_id: int) -> None:
    requests = EvalRequestStore(store)
    stale = requests.create(run_id, checkpoint="last", options=OPTIONS, queue="cpu")
    fresh = requests.create(run_id, checkpoint="last", options=OPTIONS, queue="cpu")
    waiting = requests.create(run_id, checkpoint="last", options=OPTIONS, queue="cpu")
    requests.claim(stale.id)
    requests.claim(fresh.id)
    later = utcnow() + timedelta(seconds=30)
    requests.heartbeat(fresh.id)
    assert requests.reap_stale(60, now=later) == []
    assert requests.reap_stale(10, now=later) == [stale.id, fresh.id]
    reaped = requests.get(stale.id)
    assert reaped.status == "failed" and "no heartbeat for more than 10 s" in reaped.error
    assert requests.get(waiting.id).status == "queued"  # a queued request waits for its worker
    with pytest.raises(NotFoundError, match="no run with id 999999"):
        requests.create(999999, checkpoint="last", options=OPTIONS, queue="cpu")
    store.delete_run(run_id, force=True)
    with pytest.raises(NotFoundError, match="no evaluation request"):
        requests.get(waiting.id)


def _evaluation(run_id: int, value: float, **fields) -> EvaluationInput:
    values = dict(run_id=run_id, split="eval", settings={"seed": 0}, metrics={"eval/reward_mean": value},
                  standard_errors={"eval/reward_mean": 0.1}, per_item=[], checkpoint_step=2)
    values.update(fields)
    return EvaluationInput(**values)


def test_the_latest_held_out_evaluation_of_each_run(store: Store, run_id: int, experiment_id: int) -> None:
    other = store.create_run(experiment_id, {"name": "other"}, "cpu").id
    silent = store.create_run(experiment_id, {"name": "silent"}, "cpu").id
    evaluations = EvaluationStore(store)
    evaluations.add_evaluation(_evaluation(run_id, 0.1))
    newest = evaluations.add_evaluation(_evaluation(run_id, 0.2))
    evaluations.add_evaluation(_evaluation(run_id, 0.9, split="train"))  # not held out
    evaluations.add_evaluation(_evaluation(run_id, 0.8, kind="team_analysis", label="base", analysis="a"))
    on_other = evaluations.add_evaluation(_evaluation(other, 0.5))
    latest = evaluations.latest_evaluations([run_id, other, silent])
    assert {k: v.id for k, v in latest.items()} == {run_id: newest.id, other: on_other.id}
    assert latest[run_id].metrics == {"eval/reward_mean": 0.2}
    assert evaluations.latest_evaluations([]) == {}


def test_several_evaluations_are_stored_all_or_none(store: Store, run_id: int) -> None:
    evaluations = EvaluationStore(store)
    with pytest.raises(NotFoundError, match="no run with id 424242"):
        evaluations.add_evaluations([_evaluation(run_id, 0.1, label="trained"), _evaluation(424242, 0.2)])
    assert evaluations.list_evaluations(run_id) == []
    stored = evaluations.add_evaluations([_evaluation(run_id, 0.1), _evaluation(run_id, 0.2)])
    assert [e.id for e in evaluations.list_evaluations(run_id)] == [e.id for e in stored]
