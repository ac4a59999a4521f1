"""A new evaluation request is refused, nothing stored, once the run's (or all runs') requests queued
or running reach the caller's limit; the count and the insert are one transaction no other request
interleaves with, so parallel callers never overshoot (SQLite and PostgreSQL)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from db.eval_request_store import EvalRequestLimitError, EvalRequestStore
from db.store import Store


def test_the_limits_count_queued_and_running_requests_only(store: Store, experiment_id: int, run_id: int) -> None:
    requests = EvalRequestStore(store)
    other = store.create_run(experiment_id, {"seed": 2}, "cpu").id
    first = requests.create(run_id, checkpoint="last", options={}, queue="cpu", max_active_for_run=2)
    requests.claim(first.id)
    requests.create(run_id, checkpoint="last", options={}, queue="cpu", max_active_for_run=2)
    with pytest.raises(EvalRequestLimitError) as refused:
        requests.create(run_id, checkpoint="last", options={}, queue="cpu", max_active_for_run=2)
    assert (refused.value.run_id, refused.value.active, refused.value.limit) == (run_id, 2, 2)
    requests.create(other, checkpoint="last", options={}, queue="cpu", max_active_for_run=2)  # its own count
    with pytest.raises(EvalRequestLimitError) as refused:
        requests.create(other, checkpoint="last", options={}, queue="cpu", max_active=3)
    assert (refused.value.run_id, refused.value.active) == (None, 3)
    requests.finish(first.id, "done")  # ended: no longer counted
    requests.create(run_id, checkpoint="last", options={}, queue="cpu", max_active_for_run=2, max_active=3)
    assert len(requests.list_for_run(run_id)) == 3 and len(requests.list_for_run(other)) == 1


def test_parallel_requests_cannot_overshoot_the_limit(store: Store, run_id: int) -> None:
    requests = EvalRequestStore(store)

    def create(_: int) -> bool:
        try:
            requests.create(run_id, checkpoint="last", options={}, queue="cpu", max_active_for_run=3, max_active=100)
        except EvalRequestLimitError:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(create, range(16)))
    assert created.count(True) == 3 and len(requests.list_for_run(run_id)) == 3
