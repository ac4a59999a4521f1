"""The retry policy's claim on a lost run (:meth:`db.store.Store.queue_retry`): one new attempt, however
many processes ask at once, on SQLite and PostgreSQL."""

from __future__ import annotations

import multiprocessing as mp

from db import states
from db.store import Store


def _lost_run(store: Store, config: dict | None = None, *, stop: bool = False) -> int:
    experiment = store.get_or_create_experiment("retry")
    run = store.create_run(experiment.id, {"retry": {"max_attempts": 3}} if config is None else config, "cpu",
                           total_steps=50, tags=["sweep"])
    store.transition(run.id, states.STARTING)
    store.transition(run.id, states.RUNNING)
    if stop:
        store.request_stop(run.id)
    store.transition(run.id, states.LOST, error="no heartbeat for more than 60 s: the worker died or hung")
    return run.id


def test_the_new_attempt_resumes_the_lost_run_and_marks_it(store: Store) -> None:
    lost = _lost_run(store)
    new = store.queue_retry(lost, "attempt 2 of 3: ...")
    assert new is not None
    assert (new.status, new.attempt, new.resumed_from, new.notes) == (states.QUEUED, 2, lost, "attempt 2 of 3: ...")
    assert (new.queue, new.total_steps, new.tags, dict(new.config)) == ("cpu", 50, ("sweep",),
                                                                         {"retry": {"max_attempts": 3}})
    assert store.get_run(lost).retried_as == new.id
    assert store.queue_retry(lost, "again") is None  # retried once
    assert store.lost_runs_not_retried() == []
    assert [r.id for r in store.list_runs()] == [new.id, lost]


def test_only_lost_runs_not_asked_to_stop_are_listed_and_claimed(store: Store) -> None:
    lost = _lost_run(store)
    _lost_run(store, stop=True)
    plain = _lost_run(store, {"trainer": {}})
    running = store.create_run(store.create_experiment("other").id, {"retry": {"max_attempts": 2}}, "cpu").id
    assert [r.id for r in store.lost_runs_not_retried()] == [plain, lost]
    assert [r.id for r in store.lost_runs_not_retried(config_mentions="retry")] == [lost]
    assert store.queue_retry(running, "no") is None and store.get_run(running).retried_as is None


def _claim(url: str, run_id: int, barrier: object, results: object) -> None:
    with Store(url) as store:
        barrier.wait()  # type: ignore[attr-defined]
        new = store.queue_retry(run_id, "attempt 2 of 3")
        results.put(new.id if new is not None else None)  # type: ignore[attr-defined]


def test_processes_settling_at_once_queue_one_attempt(store_url: str) -> None:
    store = Store(store_url)
    lost = _lost_run(store)
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(store_url, lost, barrier, results)) for _ in range(3)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    winners = [o for o in outcomes if o is not None]
    assert len(winners) == 1, outcomes
    assert [r.id for r in store.list_runs()] == [winners[0], lost]  # the losers' rows were never written
    assert store.get_run(lost).retried_as == winners[0]
    store.close()
