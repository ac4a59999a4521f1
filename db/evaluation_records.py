"""What leaves the store about evaluations: a plain frozen record (never an ORM object)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

KINDS = ("eval", "team_analysis", "baseline")
"""A plain evaluation of the team, a variant of a team analysis, a test-time baseline of the base models."""


@dataclass(frozen=True)
class EvaluationInput:
    """An evaluation to store (see :class:`Evaluation`); ``episodes`` are JSON episode dicts."""

    run_id: int
    split: str
    settings: Mapping[str, Any]
    metrics: Mapping[str, float]
    standard_errors: Mapping[str, float]
    per_item: Sequence[Mapping[str, Any]]
    episodes: Sequence[Mapping[str, Any]] = ()
    checkpoint_step: int | None = None
    checkpoint_path: str | None = None
    kind: str = "eval"
    label: str = ""
    analysis: str | None = None


@dataclass(frozen=True)
class Evaluation:
    """A stored evaluation of run ``run_id``'s team at ``checkpoint_step`` on ``split``: ``settings``
    (seed, greedy, samples, items, ...), ``metrics`` with their ``standard_errors``, ``per_item``
    outcomes and the evaluated ``episodes``. A team analysis is several, one per variant (``label``),
    sharing ``analysis``. A test-time baseline (``kind`` baseline, ``label`` its protocol: single,
    parallel, pipeline, discussion) evaluates the run's base models, at no checkpoint."""

    id: int
    run_id: int
    kind: str
    label: str
    analysis: str | None
    checkpoint_step: int | None
    checkpoint_path: str | None
    split: str
    settings: Mapping[str, Any]
    metrics: Mapping[str, float]
    standard_errors: Mapping[str, float]
    per_item: tuple[Mapping[str, Any], ...]
    episodes: tuple[Mapping[str, Any], ...]
    created_at: datetime


REQUEST_QUEUED, REQUEST_RUNNING, REQUEST_DONE, REQUEST_FAILED = "queued", "running", "done", "failed"
REQUEST_STATUSES = (REQUEST_QUEUED, REQUEST_RUNNING, REQUEST_DONE, REQUEST_FAILED)
REQUEST_FINAL = frozenset({REQUEST_DONE, REQUEST_FAILED})


@dataclass(frozen=True)
class EvalRequest:
    """An evaluation of run ``run_id`` queued on the workers (``queue``, the run's): the ``checkpoint``
    to evaluate (``last``, ``best`` or a step) with ``options`` (split, items, samples, greedy, seed,
    team_analysis, metric, baselines), and where it stands: ``queued → running → done | failed``. A done
    request lists the evaluation records it stored (``evaluation_ids``); a failed one says why in
    ``error`` (one line)."""

    id: int
    run_id: int
    status: str
    checkpoint: str
    options: Mapping[str, Any]
    queue: str
    celery_task_id: str | None
    worker: str | None
    error: str | None
    evaluation_ids: tuple[int, ...]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None

    @property
    def is_final(self) -> bool:
        return self.status in REQUEST_FINAL
