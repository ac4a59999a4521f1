"""Run states and the transitions between them (pure; no database).

A run moves ``queued → starting → running → stopping → {succeeded, failed, stopped, lost}``; a queued
run can be ``cancelled`` (or ``failed`` when its stored config is invalid); a starting run can fail
or be lost before its first step. Terminal states never change again: a resumed run is a new run
(a new attempt) that points back at the old one through ``resumed_from``.
"""

from __future__ import annotations

QUEUED = "queued"
STARTING = "starting"
RUNNING = "running"
STOPPING = "stopping"
SUCCEEDED = "succeeded"
FAILED = "failed"
STOPPED = "stopped"
LOST = "lost"
CANCELLED = "cancelled"

ALL_STATUSES: tuple[str, ...] = (QUEUED, STARTING, RUNNING, STOPPING, SUCCEEDED, FAILED, STOPPED, LOST, CANCELLED)
ACTIVE_STATUSES: frozenset[str] = frozenset({QUEUED, STARTING, RUNNING, STOPPING})
"""A run in one of these states may still change; the others are final."""
LIVE_STATUSES: frozenset[str] = frozenset({STARTING, RUNNING, STOPPING})
"""States in which a worker holds the run and must keep its heartbeat fresh."""
TERMINAL_STATUSES: frozenset[str] = frozenset({SUCCEEDED, FAILED, STOPPED, LOST, CANCELLED})

TRANSITIONS: dict[str, frozenset[str]] = {
    QUEUED: frozenset({STARTING, CANCELLED, FAILED}),
    STARTING: frozenset({RUNNING, STOPPING, FAILED, LOST, STOPPED}),
    RUNNING: frozenset({STOPPING, SUCCEEDED, FAILED, LOST}),
    STOPPING: frozenset({STOPPED, SUCCEEDED, FAILED, LOST}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    STOPPED: frozenset(),
    LOST: frozenset(),
    CANCELLED: frozenset(),
}
"""Allowed moves: ``TRANSITIONS[current]`` is the set of states a run in ``current`` may enter."""


class InvalidTransition(ValueError):
    """A run was asked to move to a state it may not enter from where it is (or from where the caller
    expected it to be). ``current`` is the state the run was actually in."""

    def __init__(self, run_id: int, current: str, to: str, expected_from: str | None = None) -> None:
        self.run_id = run_id
        self.current = current
        self.to = to
        self.expected_from = expected_from
        if expected_from is not None and expected_from != current:
            why = f"expected it to be {expected_from!r}"
        else:
            allowed = ", ".join(sorted(TRANSITIONS.get(current, ()))) or "nothing (it is final)"
            why = f"from {current!r} it may only move to: {allowed}"
        super().__init__(f"run {run_id} is {current!r} and cannot move to {to!r}: {why}")


def check_status(status: str) -> str:
    """Return ``status`` if it is a known run state, else raise ``ValueError`` listing the valid ones."""
    if status not in TRANSITIONS:
        raise ValueError(f"unknown run status {status!r}; use one of: {', '.join(ALL_STATUSES)}")
    return status


def sources_of(to: str) -> frozenset[str]:
    """All states from which a run may move to ``to`` (used for the compare-and-set UPDATE)."""
    check_status(to)
    return frozenset(src for src, targets in TRANSITIONS.items() if to in targets)
