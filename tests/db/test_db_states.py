"""The run state machine: the pure table and its enforcement by the store (compare-and-set)."""

from __future__ import annotations

import pytest

from db import states
from db.states import InvalidTransition
from db.store import NotFoundError, Store

ALLOWED = [
    ("queued", "starting"), ("queued", "cancelled"), ("queued", "failed"),
    ("starting", "running"), ("starting", "failed"), ("starting", "lost"), ("starting", "stopping"),
    ("starting", "stopped"),
    ("running", "stopping"), ("running", "succeeded"), ("running", "failed"), ("running", "lost"),
    ("stopping", "stopped"), ("stopping", "succeeded"), ("stopping", "failed"), ("stopping", "lost"),
]


def test_transition_table_is_exactly_the_documented_one() -> None:
    allowed = {(a, b) for a, targets in states.TRANSITIONS.items() for b in targets}
    assert allowed == set(ALLOWED)
    for final in states.TERMINAL_STATUSES:
        assert states.TRANSITIONS[final] == frozenset()


def test_sources_of_lists_every_state_that_may_enter() -> None:
    assert states.sources_of("lost") == {"starting", "running", "stopping"}
    assert states.sources_of("cancelled") == {"queued"}
    with pytest.raises(ValueError, match="unknown run status 'done'"):
        states.sources_of("done")


def _walk_to(store: Store, run_id: int, status: str) -> None:
    path = {"queued": [], "starting": ["starting"], "running": ["starting", "running"],
            "stopping": ["starting", "running", "stopping"]}[status]
    for step in path:
        store.transition(run_id, step)


@pytest.mark.parametrize(("src", "dst"), ALLOWED)
def test_store_allows_each_documented_move(store: Store, run_id: int, src: str, dst: str) -> None:
    _walk_to(store, run_id, src)
    run = store.transition(run_id, dst, expected_from=src)
    assert run.status == dst
    assert (run.finished_at is not None) == (dst in states.TERMINAL_STATUSES)


REFUSED = [("queued", "running"), ("queued", "succeeded"), ("queued", "lost"), ("running", "queued"),
           ("running", "cancelled"), ("stopping", "running"), ("starting", "succeeded")]


@pytest.mark.parametrize(("src", "dst"), REFUSED)
def test_store_refuses_undocumented_moves(store: Store, run_id: int, src: str, dst: str) -> None:
    _walk_to(store, run_id, src)
    with pytest.raises(InvalidTransition) as info:
        store.transition(run_id, dst)
    assert info.value.current == src
    assert f"cannot move to {dst!r}" in str(info.value)
    assert store.get_run(run_id).status == src


@pytest.mark.parametrize("final", sorted(states.TERMINAL_STATUSES - {"cancelled"}))
def test_final_states_never_change(store: Store, run_id: int, final: str) -> None:
    _walk_to(store, run_id, "stopping")
    store.transition(run_id, final)
    for target in states.ALL_STATUSES:
        with pytest.raises(InvalidTransition, match="it is final"):
            store.transition(run_id, target)


def test_expected_from_is_a_compare_and_set(store: Store, run_id: int) -> None:
    store.transition(run_id, "starting", expected_from="queued", worker="w1")
    # A second worker that also thinks the run is queued loses, even though starting->running is legal.
    with pytest.raises(InvalidTransition, match="expected it to be 'queued'") as info:
        store.transition(run_id, "starting", expected_from="queued", worker="w2")
    assert info.value.current == "starting"
    with pytest.raises(InvalidTransition):
        store.transition(run_id, "running", expected_from="queued")
    run = store.get_run(run_id)
    assert (run.status, run.worker) == ("starting", "w1")


def test_transition_records_times_error_and_worker(store: Store, run_id: int) -> None:
    started = store.transition(run_id, "starting", worker="cpu@host")
    assert started.worker == "cpu@host" and started.heartbeat_at is not None and started.started_at is None
    running = store.transition(run_id, "running")
    assert running.started_at is not None and running.finished_at is None
    failed = store.transition(run_id, "failed", error="Traceback ...\nValueError: boom")
    assert failed.error.endswith("ValueError: boom")
    assert failed.finished_at >= failed.started_at


def test_unknown_run_and_status_are_reported(store: Store, run_id: int) -> None:
    with pytest.raises(NotFoundError, match="no run with id 999"):
        store.transition(999, "starting")
    with pytest.raises(ValueError, match="unknown run status 'finished'"):
        store.transition(run_id, "finished")
