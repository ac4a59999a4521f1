"""Evaluations in the database: :class:`EvaluationStore` works on a :class:`db.store.Store`'s engine,
each method one transaction returning frozen :class:`db.evaluation_records.Evaluation` records.

Stored prompts and completions of the evaluated episodes are capped like every transcript
(:mod:`db.text_cap`)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import func, select

from db.engine import StoreBase
from db.errors import NotFoundError
from db.evaluation_records import KINDS, Evaluation, EvaluationInput
from db.models import EvaluationRow, RunRow
from db.store import Store
from db.text_cap import cap_text


def _capped(episode: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(episode))
    for turn in out.get("turns") or []:
        for key in ("prompt", "completion"):
            if isinstance(turn.get(key), str):
                turn[key] = cap_text(turn[key])
    return out


def _record(row: EvaluationRow) -> Evaluation:
    return Evaluation(id=row.id, run_id=row.run_id, kind=row.kind, label=row.label, analysis=row.analysis,
                      checkpoint_step=row.checkpoint_step, checkpoint_path=row.checkpoint_path, split=row.split,
                      settings=dict(row.settings), metrics=dict(row.metrics),
                      standard_errors=dict(row.standard_errors), per_item=tuple(row.per_item),
                      episodes=tuple(row.episodes), created_at=row.created_at)


class EvaluationStore(StoreBase):
    """Evaluations of runs, on the database of ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    def add_evaluation(self, evaluation: EvaluationInput) -> Evaluation:
        """Store one evaluation of an existing run (else :class:`NotFoundError`); returns it with its id."""
        return self.add_evaluations([evaluation])[0]

    def add_evaluations(self, evaluations: Sequence[EvaluationInput]) -> list[Evaluation]:
        """Store several evaluations (the variants of a team analysis) in one transaction: all of them
        or, when one is refused, none."""
        for evaluation in evaluations:
            if evaluation.kind not in KINDS:
                raise ValueError(f"evaluation kind must be one of {KINDS}, got {evaluation.kind!r}")
        with self._write() as s:
            return [self._add(s, evaluation) for evaluation in evaluations]

    @staticmethod
    def _add(s: Any, evaluation: EvaluationInput) -> Evaluation:
        if s.get(RunRow, evaluation.run_id) is None:
            raise NotFoundError(f"no run with id {evaluation.run_id}")
        row = EvaluationRow(
            run_id=evaluation.run_id, kind=evaluation.kind, label=evaluation.label, analysis=evaluation.analysis,
            checkpoint_step=evaluation.checkpoint_step, checkpoint_path=evaluation.checkpoint_path,
            split=evaluation.split, settings=dict(evaluation.settings),
            metrics={k: float(v) for k, v in evaluation.metrics.items()},
            standard_errors={k: float(v) for k, v in evaluation.standard_errors.items()},
            per_item=[dict(item) for item in evaluation.per_item],
            episodes=[_capped(episode) for episode in evaluation.episodes],
        )
        s.add(row)
        s.flush()
        return _record(row)

    def get_evaluation(self, evaluation_id: int) -> Evaluation:
        """The evaluation with this id (else :class:`NotFoundError`)."""
        with self._read() as s:
            row = s.get(EvaluationRow, evaluation_id)
            if row is None:
                raise NotFoundError(f"no evaluation with id {evaluation_id}")
            return _record(row)

    def list_evaluations(self, run_id: int) -> list[Evaluation]:
        """A run's evaluations, oldest first."""
        with self._read() as s:
            rows = s.scalars(select(EvaluationRow).where(EvaluationRow.run_id == run_id).order_by(EvaluationRow.id))
            return [_record(row) for row in rows]

    def latest_evaluations(self, run_ids: Iterable[int], *, split: str = "eval") -> dict[int, Evaluation]:
        """Per run, its newest plain evaluation (``kind`` eval, not a team analysis) on ``split``; runs
        without one are left out. Compare and study results read the held-out metrics from these."""
        wanted = sorted({int(i) for i in run_ids})
        if not wanted:
            return {}
        newest = (select(EvaluationRow.run_id, func.max(EvaluationRow.id).label("id"))
                  .where(EvaluationRow.run_id.in_(wanted), EvaluationRow.kind == "eval", EvaluationRow.split == split)
                  .group_by(EvaluationRow.run_id).subquery())
        with self._read() as s:
            rows = s.scalars(select(EvaluationRow).join(newest, EvaluationRow.id == newest.c.id))
            return {row.run_id: _record(row) for row in rows}
