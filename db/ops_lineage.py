"""A run's attempts as one history (called by :class:`db.store.Store`).

Resuming a run creates a new attempt (a new run row with ``resumed_from``) that continues from the
last checkpoint, so it logs again the steps after that checkpoint that the earlier attempt had
already logged. The joined history shows each step once: an attempt owns the steps from its first
logged step on, the attempt before it keeps the steps before that (the later attempt wins where
they overlap). Metric series and transcript steps are read per attempt with those step bounds, so
every query stays an indexed range read.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.orm import Session

from db import ops_metrics, ops_transcripts
from db.models import RunRow
from db.ops_runs import load
from db.records import Attempt, JoinedSeries, Lineage, Series

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


def lineage(session: Session, run_id: int) -> Lineage:
    row = load(session, run_id)
    found = session.execute(
        select(RunRow.id, RunRow.resumed_from, RunRow.attempt, RunRow.status, RunRow.step, RunRow.first_step)
        .where(RunRow.experiment_id == row.experiment_id)).all()
    by_id = {r.id: r for r in found}
    ids = chain({r.id: r.resumed_from for r in found}, run_id)
    rows = [(i, by_id[i].attempt, by_id[i].status, int(by_id[i].step or 0), by_id[i].first_step) for i in ids]
    return Lineage(run_id=run_id, attempts=ownership(rows))


def _span(attempt: Attempt) -> int:
    start = attempt.owns_from if attempt.owns_from is not None else (attempt.first_step or 0)
    end = attempt.owns_to if attempt.owns_to is not None else attempt.step
    return max(1, end - start + 1)


def joined_series(session: Session, history: Lineage, key: str, *, x: str, max_points: int,
                  x_min: float | None, x_max: float | None) -> JoinedSeries:
    owning = [a for a in history.attempts if not a.owns_nothing]
    if len(owning) <= 1:
        only = owning[0] if owning else None
        one = ops_metrics.series(session, only.run_id if only else history.run_id, key, x=x, max_points=max_points,
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
        part = ops_metrics.series(session, attempt.run_id, key, x=x, max_points=budget, x_min=x_min, x_max=x_max,
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


def episode_steps(session: Session, history: Lineage, *, split: str | None) -> list[tuple[int, int]]:
    """``(step, run_id)`` of every step with stored episodes in the joined history, ascending; each
    step once, from the attempt that owns it."""
    out: dict[int, int] = {}
    for attempt in history.attempts:
        if attempt.owns_nothing:
            continue
        for step in ops_transcripts.episode_steps(session, attempt.run_id, split=split):
            if attempt.owns(step):
                out[step] = attempt.run_id
    return sorted(out.items())
