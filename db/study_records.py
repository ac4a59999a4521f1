"""Plain frozen records of studies and their children (what :class:`db.study_store.StudyStore` returns)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ACTIVE = "active"
STOPPED = "stopped"
FINISHED = "finished"
STUDY_STATUSES = (ACTIVE, STOPPED, FINISHED)
"""``active``: its scheduler queues children up to the cap; ``stopped``: stop-all was asked, nothing
new is queued; ``finished``: every child ended."""

PENDING = "pending"
"""The state of a child without a run yet: it waits for a free slot (or for resume-all)."""


@dataclass(frozen=True)
class Study:
    """A base config and a search space over run-config fields, each point run with several seeds;
    ``spec`` is the whole definition (base config, space, method, seeds, early stopping)."""

    id: int
    name: str
    description: str
    experiment_id: int
    spec: Mapping[str, Any]
    status: str
    queue: str
    max_concurrent: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class StudyTrial:
    """One child: point ``point`` of the space (``params`` by dotted path) with seed ``seed`` (the
    ``seed_index``-th of the point). ``status`` is its run's state, or ``pending`` while it has none;
    ``previous_run_ids`` are the runs it had before a resume-all; ``stop_reason`` says why the study
    stopped it early."""

    id: int
    study_id: int
    point: int
    seed_index: int
    seed: int
    params: Mapping[str, Any]
    config: Mapping[str, Any]
    run_id: int | None
    previous_run_ids: tuple[int, ...]
    stop_reason: str | None
    status: str
    step: int
    error: str | None


@dataclass(frozen=True)
class TrialInput:
    """A child to store with a new study: point ``point`` (its ``params`` by path) with its
    ``seed_index``-th seed ``seed``, and its whole run ``config`` (already validated by the caller)."""

    point: int
    seed_index: int
    seed: int
    params: Mapping[str, Any]
    config: Mapping[str, Any]


@dataclass(frozen=True)
class RunMetricSummary:
    """One metric of one run from its stored points: the value at its last step, its best (largest)
    value, and how many non-NaN points it has."""

    run_id: int
    key: str
    last_step: int
    final: float | None
    best: float | None
    count: int
