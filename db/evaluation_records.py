"""What leaves the store about evaluations: a plain frozen record (never an ORM object)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

KINDS = ("eval", "team_analysis")


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
    sharing ``analysis``."""

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
