"""The runs table's reads and a run's display name: :class:`RunTableOps`, part of :class:`db.store.Store`.

The runs table sorts, searches and groups every run that its filters match, so it reads them all at
once: one query for the runs (with what their step rate needs) and one for the summary of the chosen
metrics of all of them (:func:`metric_extremes`), whatever the number of runs. The summary's smallest
and largest values come from the coarsest rollup blocks (:mod:`db.rollups`: one row per 4096 steps of
a run and key) and its last value from one index seek per run and key, inside the same statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, aliased

from db import convert
from db.engine import StoreBase
from db.models import MetricRollupRow, MetricRow, RunRow
from db.ops_runs import compute_rate, filter_runs, load
from db.records import Run
from db.rollups import LEVELS

MAX_NAME_CHARS = 200
COARSEST = LEVELS[-1]


@dataclass(frozen=True)
class MetricSummary:
    """One metric of one run: its last non-NaN value (highest step), smallest and largest value, and
    how many non-NaN points it has."""

    last: float | None
    lowest: float
    highest: float
    count: int


@dataclass(frozen=True)
class TableRun:
    """A run as the runs table shows it: the run, its step rate and its chosen metrics by key."""

    run: Run
    steps_per_s: float | None
    metrics: dict[str, MetricSummary]


def run_filter(experiment_id: int | None = None, statuses: Iterable[str] | None = None,
               tag: str | None = None) -> Select[Any]:
    """The ids of the runs of one experiment, in some states and carrying a tag (each optional)."""
    return filter_runs(select(RunRow.id), experiment_id, statuses, tag)


def metric_extremes(session: Session, run_ids: Select[Any], keys: Sequence[str],
                    ) -> dict[int, dict[str, MetricSummary]]:
    """The summary of ``keys`` for every run ``run_ids`` selects, in one statement: per run and key the
    coarsest rollup blocks give the extremes and the count, and a correlated seek on the
    ``(run_id, key, step, value)`` index the last non-NaN value."""
    out: dict[int, dict[str, MetricSummary]] = {}
    if not keys:
        return out
    r = MetricRollupRow
    m = aliased(MetricRow)
    last = (select(m.value).where(m.run_id == r.run_id, m.key == r.key, m.value.is_not(None))
            .order_by(m.step.desc(), m.id.desc()).limit(1).correlate(r).scalar_subquery())
    query = (select(r.run_id, r.key, func.min(r.min_value), func.max(r.max_value), func.sum(r.count), last)
             .where(r.level == COARSEST, r.key.in_(list(dict.fromkeys(keys))), r.run_id.in_(run_ids.scalar_subquery()))
             .group_by(r.run_id, r.key))
    for run_id, key, lowest, highest, count, value in session.execute(query):
        out.setdefault(int(run_id), {})[key] = MetricSummary(
            last=None if value is None else float(value), lowest=float(lowest), highest=float(highest),
            count=int(count or 0))
    return out


class RunTableOps(StoreBase):
    """What the runs table reads, and runs' display names: the operations of :class:`db.store.Store`."""

    def table_runs(self, experiment_id: int | None = None, statuses: Iterable[str] | None = None, *,
                   tag: str | None = None, metric_keys: Sequence[str] = (), limit: int = 5000) -> list[TableRun]:
        """Every run the filters match (the newest ``limit``), newest first, each with its step rate and
        the summary of ``metric_keys``: two queries, whatever the number of runs."""
        with self._read() as session:
            ids = run_filter(experiment_id, statuses, tag).order_by(RunRow.id.desc()).limit(limit)
            rows = session.scalars(select(RunRow).where(RunRow.id.in_(ids.scalar_subquery()))
                                   .order_by(RunRow.id.desc())).all()
            summaries = metric_extremes(session, ids, metric_keys)
            out = []
            for row in rows:
                rate, _ = compute_rate(row.step, row.total_steps, row.first_step, row.first_step_at, row.last_step_at)
                out.append(TableRun(run=convert.run(row), steps_per_s=rate, metrics=summaries.get(row.id, {})))
            return out

    def table_metric_keys(self, experiment_id: int | None = None, *, tag: str | None = None) -> list[str]:
        """The metric keys (with at least one non-NaN point) of the runs the filters match, sorted: read
        from the coarsest rollup blocks, a few rows per run and key."""
        with self._read() as session:
            query = (select(MetricRollupRow.key).distinct()
                     .where(MetricRollupRow.level == COARSEST,
                            MetricRollupRow.run_id.in_(run_filter(experiment_id, None, tag).scalar_subquery())))
            return sorted(session.scalars(query))

    def rename_run(self, run_id: int, name: str | None) -> Run:
        """Give the run a display name (surrounding blanks dropped); an empty or None name removes it."""
        cleaned = (name or "").strip()
        if "\n" in cleaned or "\r" in cleaned:
            raise ValueError("a run's name is one line; remove the line break")
        if len(cleaned) > MAX_NAME_CHARS:
            raise ValueError(f"a run's name is {len(cleaned)} characters long; keep it within {MAX_NAME_CHARS}")
        with self._write() as session:
            row = load(session, run_id)
            row.name = cleaned or None
            session.flush()
            return convert.run(row)
