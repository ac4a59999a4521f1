"""A run's attempts as one history: :class:`LineageOps`, part of :class:`db.store.Store`.

Resuming a run creates a new attempt (a new run row with ``resumed_from``) that continues from the
last checkpoint, so it logs again the steps after that checkpoint that the earlier attempt had
already logged. The joined history shows each step once: an attempt owns the steps from its first
logged step on, the attempt before it keeps the steps before that (the later attempt wins where
they overlap). Metric series and transcript steps are read per attempt with those step bounds, so
every query stays an indexed range read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from sqlalchemy import and_, false, or_, select
from sqlalchemy.sql.elements import ColumnElement

from db.models import MetricRow, RunRow
from db.ops_metrics import MetricOps, iter_csv, iter_jsonl
from db.ops_runs import load
from db.ops_transcripts import jsonl_batch
from db.records import Attempt, JoinedSeries, Lineage, MetricPoint, Series

MIN_SEGMENT_POINTS = 16


def chain(parents: dict[int, int | None], run_id: int) -> list[int]:
    """The attempts of ``run_id``'s history, oldest first (pure): the runs it was resumed from, itself,
    then the newest resume of each attempt in turn. ``parents`` maps run id → ``resumed_from``."""
    children: dict[int, list[int]] = defaultdict(list)
    for child, parent in parents.items():
        if parent is not None:
            children[parent].append(child)
    ids = [run_id]
    seen = {run_id}
    parent = parents.get(run_id)
    while parent is not None and parent in parents and parent not in seen:
        ids.insert(0, parent)
        seen.add(parent)
        parent = parents.get(parent)
    current = run_id
    while children.get(current):
        newest = max(children[current])
        if newest in seen:
            break
        ids.append(newest)
        seen.add(newest)
        current = newest
    return ids


def ownership(rows: list[tuple[int, int, str, int, int | None]]) -> tuple[Attempt, ...]:
    """The steps each attempt owns (pure). ``rows`` are ``(run_id, attempt, status, step, first_step)``
    oldest first; an attempt owns its steps from its first logged step up to the step before the next
    attempt's first logged step."""
    attempts: list[Attempt] = []
    boundary: int | None = None  # first step of the next attempt that logged anything
    for index in range(len(rows) - 1, -1, -1):
        run_id, number, status, step, first = rows[index]
        owns_to = None if boundary is None else boundary - 1
        if index == 0:
            owns_from, nothing = None, False
        else:
            owns_from, nothing = first, first is None
        if owns_from is not None and owns_to is not None and owns_to < owns_from:
            nothing = True
        attempts.append(Attempt(run_id=run_id, attempt=number, status=status, step=step, first_step=first,
                                owns_from=owns_from, owns_to=owns_to, owns_nothing=nothing))
        if index > 0 and first is not None:
            boundary = first if boundary is None else min(boundary, first)
    return tuple(reversed(attempts))


def _span(attempt: Attempt) -> int:
    start = attempt.owns_from if attempt.owns_from is not None else (attempt.first_step or 0)
    end = attempt.owns_to if attempt.owns_to is not None else attempt.step
    return max(1, end - start + 1)


def owned_points(history: Lineage) -> ColumnElement[bool]:
    """The metric rows the joined history shows: each attempt's own steps."""
    parts = []
    for attempt in history.attempts:
        if attempt.owns_nothing:
            continue
        bounds = [MetricRow.run_id == attempt.run_id]
        if attempt.owns_from is not None:
            bounds.append(MetricRow.step >= attempt.owns_from)
        if attempt.owns_to is not None:
            bounds.append(MetricRow.step <= attempt.owns_to)
        parts.append(and_(*bounds))
    return or_(*parts) if parts else false()


class LineageOps(MetricOps):
    """A run's history: the operations of :class:`db.store.Store` on it, each one transaction."""

    def lineage(self, run_id: int) -> Lineage:
        """The run's whole history, oldest attempt first: the runs it was resumed from, itself, and the
        newest resume of each attempt after it; with the steps each attempt owns in the joined view
        (an attempt owns its steps from its first logged step on: the later attempt wins)."""
        with self._read() as session:
            row = load(session, run_id)
            found = session.execute(
                select(RunRow.id, RunRow.resumed_from, RunRow.attempt, RunRow.status, RunRow.step, RunRow.first_step)
                .where(RunRow.experiment_id == row.experiment_id)).all()
            by_id = {r.id: r for r in found}
            ids = chain({r.id: r.resumed_from for r in found}, run_id)
            rows = [(i, by_id[i].attempt, by_id[i].status, int(by_id[i].step or 0), by_id[i].first_step) for i in ids]
            return Lineage(run_id=run_id, attempts=ownership(rows))

    def joined_series(self, history: Lineage, key: str, x: str = "step", max_points: int = 1000,
                      x_min: float | None = None, x_max: float | None = None) -> JoinedSeries:
        """A metric along a run's whole history (:meth:`lineage`): each attempt's own steps, joined
        into one series (each step once), with where each later attempt begins on the x axis. Each
        attempt is downsampled like :meth:`series`, sharing ``max_points`` by the steps it owns."""
        with self._read() as session:
            inside = self.within(session)  # every attempt read in this one snapshot
            owning = [a for a in history.attempts if not a.owns_nothing]
            if len(owning) <= 1:
                only = owning[0] if owning else None
                one = inside.series(only.run_id if only else history.run_id, key, x=x, max_points=max_points,
                                    x_min=x_min, x_max=x_max, step_min=only.owns_from if only else None,
                                    step_max=only.owns_to if only else None)
                return JoinedSeries(series=one, boundaries=())
            total_span = sum(_span(a) for a in owning)
            xs: list[float] = []
            ys: list[float] = []
            total = 0
            downsampled = False
            boundaries: list[tuple[float, int, int]] = []
            for index, attempt in enumerate(owning):
                budget = max(MIN_SEGMENT_POINTS, max_points * _span(attempt) // total_span)
                part = inside.series(attempt.run_id, key, x=x, max_points=budget, x_min=x_min, x_max=x_max,
                                     step_min=attempt.owns_from, step_max=attempt.owns_to)
                if not len(part):
                    continue
                if index > 0:
                    boundaries.append((part.xs[0], attempt.attempt, attempt.run_id))
                xs.extend(part.xs)
                ys.extend(part.ys)
                total += part.total_points
                downsampled = downsampled or part.downsampled
            series = Series(run_id=history.run_id, key=key, x=x, xs=tuple(xs), ys=tuple(ys), total_points=total,
                            downsampled=downsampled)
            return JoinedSeries(series=series, boundaries=tuple(boundaries))

    def lineage_episode_steps(self, history: Lineage, split: str | None = None) -> list[tuple[int, int]]:
        """``(step, run_id)`` of the steps with stored episodes along a run's history, ascending, each
        step from the attempt that owns it."""
        with self._read() as session:
            inside = self.within(session)
            out: dict[int, int] = {}
            for attempt in history.attempts:
                if attempt.owns_nothing:
                    continue
                for step in inside.episode_steps(attempt.run_id, split=split):
                    if attempt.owns(step):
                        out[step] = attempt.run_id
            return sorted(out.items())

    def iter_lineage_metrics(self, history: Lineage, keys: Iterable[str] | None = None) -> Iterator[MetricPoint]:
        """Every point of the joined history (each step once, from the attempt that owns it) ordered by
        key and step, read in batches: what the joined chart draws, for exports."""
        return self.iter_points(owned_points(history), keys)

    def stream_lineage_metrics_csv(self, history: Lineage) -> Iterator[str]:
        """The joined history's points as CSV text in chunks (the format of ``stream_metrics_csv``)."""
        return iter_csv(self.iter_lineage_metrics(history))

    def stream_lineage_metrics_jsonl(self, history: Lineage) -> Iterator[str]:
        """The joined history's points as JSON lines, in chunks."""
        return iter_jsonl(self.iter_lineage_metrics(history))

    def stream_lineage_episodes_jsonl(self, history: Lineage, *, batch_size: int = 200) -> Iterator[str]:
        """The joined history's episodes (each attempt's own steps, oldest attempt first) as JSON lines in
        chunks, each read in its own short session."""
        for attempt in history.attempts:
            if attempt.owns_nothing:
                continue
            last_id = -1
            while True:
                with self._read() as session:
                    text, last_id = jsonl_batch(session, attempt.run_id, after_id=last_id, batch_size=batch_size,
                                                steps=(attempt.owns_from, attempt.owns_to))
                if not text:
                    break
                yield text
