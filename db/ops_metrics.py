"""Metric writes (batched, one transaction per step) and reads (keys, latest, downsampled series):
:class:`MetricOps`, part of :class:`db.store.Store`."""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Table, func, insert, or_, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from db import rollups
from db.clock import db_now
from db.csv_cells import spreadsheet_cell
from db.downsample import bucket_count, in_range, kept_points, step_range_extremes, x_column
from db.errors import NotFoundError, RunSettledError
from db.models import MetricRow, RunRow
from db.ops_transcripts import TranscriptOps
from db.records import MetricPoint, Series
from db.states import LIVE_STATUSES
from engine.transcripts import Episode

MAX_KEY_CHARS = 200


def metric_rows(run_id: int, step: int, env_step: int | None, metrics: Mapping[str, Any],
                wall_time: float) -> list[dict[str, Any]]:
    """Validated rows for one batch; NaN is stored as NULL (and read back as NaN)."""
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of key -> number, not {type(metrics).__name__}")
    rows = []
    for key, value in metrics.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            raise ValueError(f"metric key {key!r} must be a non-empty string of at most {MAX_KEY_CHARS} characters")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"metric {key!r} has value {value!r}, which is not a number") from None
        rows.append({"run_id": run_id, "key": key, "step": int(step), "env_step": env_step,
                     "value": None if math.isnan(number) else number, "wall_time": wall_time})
    return rows


def _insert(session: Session, run_id: int, rows: list[dict[str, Any]]) -> None:
    """Insert metric rows and fold them into the rollups, in the caller's transaction."""
    table = cast(Table, MetricRow.__table__)  # a declarative class's table (typed as any FROM clause)
    session.connection().execute(insert(table), rows)  # Core executemany: no ORM per-row work
    rollups.write(session, run_id, ((r["key"], r["step"], r["value"]) for r in rows))


def _value(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _point(step: int, value: float | None) -> tuple[int, float]:
    """A point read by a query whose WHERE clause has ``value IS NOT NULL`` (:func:`db.downsample.in_range`,
    :func:`_raw_block`)."""
    assert value is not None  # the query leaves out the NULLs NaN values are stored as
    return int(step), float(value)


def _end_point(session: Session, where: Any, *, last: bool) -> tuple[int, float] | None:
    order = (MetricRow.step.desc(), MetricRow.id.desc()) if last else (MetricRow.step.asc(), MetricRow.id.asc())
    row = session.execute(select(MetricRow.step, MetricRow.value).where(where).order_by(*order).limit(1)).first()
    return None if row is None else _point(row[0], row[1])


def _raw_block(session: Session, run_id: int, key: str, start: int, stop: int) -> rollups.Extremes | None:
    """The extremes of the steps ``[start, stop)`` from the metrics table (a block the requested range
    cuts through; a few thousand points at most)."""
    rows = session.execute(
        select(MetricRow.step, MetricRow.value)
        .where(MetricRow.run_id == run_id, MetricRow.key == key, MetricRow.value.is_not(None),
               MetricRow.step >= start, MetricRow.step < stop)).all()
    return rollups.extremes_of(_point(step, v) for step, v in rows)


def _wide_step_series(session: Session, run_id: int, key: str, where: Any, *, n: int, max_points: int,
                      x_min: float | None, x_max: float | None, source: str) -> Series | None:
    """A step series answered through the rollups, or None when the range is too narrow for them."""
    first = _end_point(session, where, last=False)
    last = _end_point(session, where, last=True)
    if first is None or last is None:
        return None
    lo, hi = first[0], last[0]
    plan = rollups.plan(lo, hi, n)
    if plan is None:
        return None
    kept = {first, last}
    if source == "raw":
        total = int(session.scalar(select(func.count()).where(where)) or 0)
        pairs = step_range_extremes(session, run_id=run_id, key=key, bounds=plan.step_bounds(lo, hi))
        kept.update((int(px), float(pv)) for px, pv in pairs if pv is not None)
    else:
        level = plan.level
        first_block, last_block = plan.first_block, plan.last_block
        # Blocks the requested range cuts through (only possible at its two ends) come from the metrics table.
        cut_lo = x_min is not None and math.ceil(x_min) > first_block << level
        cut_hi = x_max is not None and math.floor(x_max) < ((last_block + 1) << level) - 1
        edges: list[tuple[int, rollups.Extremes | None]] = []
        if first_block == last_block and (cut_lo or cut_hi):
            edges.append((first_block, _raw_block(session, run_id, key, lo, hi + 1)))
            clean = (first_block + 1, last_block)
        else:
            if cut_lo:
                edges.append((first_block, _raw_block(session, run_id, key, lo, (first_block + 1) << level)))
            if cut_hi:
                edges.append((last_block, _raw_block(session, run_id, key, last_block << level, hi + 1)))
            clean = (first_block + int(cut_lo), last_block - int(cut_hi))
        blocks = rollups.read_blocks(session, run_id=run_id, key=key, level=level, first=clean[0],
                                     last=clean[1]) if clean[0] <= clean[1] else []
        blocks += [(b, e) for b, e in edges if e is not None]
        buckets = rollups.merge_blocks(plan, blocks)
        total = sum(e.count for e in buckets.values())
        for e in buckets.values():
            kept.add((e.min_step, e.min_value))
            kept.add((e.max_step, e.max_value))
    if total <= max_points:
        rows = session.execute(select(MetricRow.step, MetricRow.value).where(where)
                               .order_by(MetricRow.step, MetricRow.id)).all()
        return Series(run_id=run_id, key=key, x="step", xs=tuple(float(r[0]) for r in rows),
                      ys=tuple(_value(r[1]) for r in rows), total_points=total, downsampled=False)
    points = sorted((float(px), float(pv)) for px, pv in kept)
    return Series(run_id=run_id, key=key, x="step", xs=tuple(p[0] for p in points), ys=tuple(p[1] for p in points),
                  total_points=total, downsampled=True)


def iter_csv(points: Iterable[MetricPoint], batch: int = 5_000) -> Iterator[str]:
    """CSV text in chunks (the header first), for streaming a large export; a metric key that starts like
    a spreadsheet formula gets a leading ``'`` (:func:`db.csv_cells.spreadsheet_cell`)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["key", "step", "env_step", "value", "wall_time"])
    for count, p in enumerate(points, start=1):
        writer.writerow([spreadsheet_cell(p.key), p.step, "" if p.env_step is None else p.env_step, repr(p.value),
                         repr(p.wall_time)])
        if count % batch == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def iter_jsonl(points: Iterable[MetricPoint]) -> Iterator[str]:
    """JSON lines, one point per line."""
    for p in points:
        yield json.dumps({"key": p.key, "step": p.step, "env_step": p.env_step,
                          "value": None if math.isnan(p.value) else p.value, "wall_time": p.wall_time}) + "\n"


class MetricOps(TranscriptOps):
    """Metrics: the operations of :class:`db.store.Store` on them, each one transaction (a training
    step's episodes go in the step's transaction, through :class:`TranscriptOps`)."""

    def log_step(self, run_id: int, step: int, env_step: int, metrics: Mapping[str, float],
                 episodes: Sequence[Episode] = (), wall_time: float | None = None, *, live_only: bool = False,
                 again: bool = False) -> bool:
        """Write one training step in ONE transaction: its metrics and episodes with their turns
        (batch inserts), the run's progress and its heartbeat. Returns the stop flag.
        ``episodes`` are :class:`engine.transcripts.Episode` records (what the engine's sink reports).

        With ``live_only`` (what a job writes) only a starting, running or stopping run takes the step,
        checked in the same UPDATE: for any other the transaction writes nothing and
        :class:`RunSettledError` is raised. ``again`` marks a retry after an error: a step the run already
        holds (its commit went through but the answer was lost) is not written twice."""
        with self._write() as session:
            rows = metric_rows(run_id, step, env_step, metrics, time.time() if wall_time is None else wall_time)
            now = db_now()  # liveness times are the database server's (db.clock)
            # One statement moves progress and heartbeat, refuses a run that is no longer live (its job's
            # step must not land on a settled run), and hands back the stop flag. A retried write (``again``)
            # also skips a step the database already holds (the commit went through, its answer was lost).
            where = [RunRow.id == run_id]
            if live_only:
                where.append(RunRow.status.in_(LIVE_STATUSES))
            if again:
                where.append(or_(RunRow.first_step.is_(None), RunRow.step < int(step)))
            stop = session.execute(
                update(RunRow).where(*where)
                .values(step=int(step), env_step=int(env_step), heartbeat_at=now, last_step_at=now,
                        first_step=func.coalesce(RunRow.first_step, int(step)),
                        first_step_at=func.coalesce(RunRow.first_step_at, now))
                .returning(RunRow.stop_requested)
                .execution_options(synchronize_session=False)).scalar_one_or_none()
            if stop is None:
                found = session.execute(select(RunRow.status, RunRow.step, RunRow.stop_requested)
                                        .where(RunRow.id == run_id)).first()
                if found is None:
                    raise NotFoundError(f"no run with id {run_id}")
                if live_only and found.status not in LIVE_STATUSES:
                    raise RunSettledError(run_id, found.status)
                return bool(found.stop_requested)  # retried: this step is already stored
            if rows:
                _insert(session, run_id, rows)
            self.within(session).log_episodes(run_id, int(step), episodes)
            return bool(stop)

    def log_metrics(self, run_id: int, step: int, env_step: int | None, metrics: Mapping[str, float],
                    wall_time: float | None = None) -> None:
        """Write metric values outside a training step (evaluation); progress is left as it is."""
        with self._write() as session:
            rows = metric_rows(run_id, step, env_step, metrics, time.time() if wall_time is None else wall_time)
            if session.scalar(select(RunRow.id).where(RunRow.id == run_id)) is None:
                raise NotFoundError(f"no run with id {run_id}")
            if rows:
                _insert(session, run_id, rows)

    def import_metrics(self, run_id: int, points: Iterable[MetricPoint], *, batch_size: int = 20_000) -> int:
        """Bulk-insert ready-made points (e.g. from an exported file) in one transaction, ``batch_size``
        rows per INSERT; progress is left as it is. Returns how many were written."""
        with self._write() as session:
            if session.scalar(select(RunRow.id).where(RunRow.id == run_id)) is None:
                raise NotFoundError(f"no run with id {run_id}")
            written = 0
            batch: list[dict[str, Any]] = []
            for p in points:
                batch.extend(metric_rows(run_id, p.step, p.env_step, {p.key: p.value}, p.wall_time))
                if len(batch) >= batch_size:
                    _insert(session, run_id, batch)
                    written, batch = written + len(batch), []
            if batch:
                _insert(session, run_id, batch)
                written += len(batch)
            return written

    def metric_keys(self, run_id: int) -> list[str]:
        """The metric keys a run has logged, sorted."""
        with self._read() as session:
            query = text(
                "WITH RECURSIVE k(key) AS ("
                " SELECT MIN(key) FROM metrics WHERE run_id = :run_id"
                " UNION ALL"
                " SELECT (SELECT MIN(m.key) FROM metrics m WHERE m.run_id = :run_id AND m.key > k.key)"
                " FROM k WHERE k.key IS NOT NULL"
                ") SELECT key FROM k WHERE key IS NOT NULL"
            )
            return sorted(session.scalars(query, {"run_id": run_id}))

    def series(self, run_id: int, key: str, x: str = "step", max_points: int = 1000,
               x_min: float | None = None, x_max: float | None = None, *, step_min: int | None = None,
               step_max: int | None = None, source: str = "auto") -> Series:
        """A metric along ``x`` (``"step"``, ``"env_step"`` or ``"wall_time"``), at most ``max_points``
        points: when there are more, the x range is cut into buckets and each bucket's minimum and
        maximum are kept, plus the first and last point, so spikes survive. Computed in the database:
        wide step ranges from the rollup table (:mod:`db.rollups`), narrower ones from the points.
        ``step_min`` / ``step_max`` keep only those steps, whatever the x axis (a resumed run's history
        takes each attempt's own steps).

        ``source="raw"`` computes the rollups' bucketing from the metrics table alone, ``"grouped"``
        groups every point of the range by its bucket number on any axis: the slow references that the
        rollups and the index seeks are checked against."""
        with self._read() as session:
            if source not in ("auto", "raw", "grouped"):
                raise ValueError(f"unknown series source {source!r}; use 'auto', 'raw' or 'grouped'")
            if x == "step":  # the step bounds are x bounds: the rollups can still answer
                if step_min is not None:
                    x_min = step_min if x_min is None else max(float(x_min), step_min)
                if step_max is not None:
                    x_max = step_max if x_max is None else min(float(x_max), step_max)
                step_min = step_max = None
            col = x_column(x)
            n = bucket_count(max_points)
            where = in_range(run_id, key, x, x_min, x_max, step_min=step_min, step_max=step_max)
            if x == "step" and source != "grouped":
                wide = _wide_step_series(session, run_id, key, where, n=n, max_points=max_points, x_min=x_min,
                                         x_max=x_max, source=source)
                if wide is not None:
                    return wide
            lo, hi, total = session.execute(select(func.min(col), func.max(col), func.count()).where(where)).one()
            total = int(total or 0)
            if total == 0:
                return Series(run_id=run_id, key=key, x=x, xs=(), ys=(), total_points=0, downsampled=False)
            if total <= max_points:
                rows = session.execute(select(col, MetricRow.value).where(where).order_by(col, MetricRow.id)).all()
                return Series(run_id=run_id, key=key, x=x, xs=tuple(float(r[0]) for r in rows),
                              ys=tuple(_value(r[1]) for r in rows), total_points=total, downsampled=False)
            points = kept_points(session, where, run_id=run_id, key=key, x=x, lo=float(lo), hi=float(hi), n=n,
                                 step_min=step_min, step_max=step_max, grouped=source == "grouped")
            return Series(run_id=run_id, key=key, x=x, xs=tuple(p[0] for p in points), ys=tuple(p[1] for p in points),
                          total_points=total, downsampled=True)

    def points_since(self, run_id: int, keys: Iterable[str], *, step_from: int = 0, after_id: int = 0,
                     limit: int | None = None) -> tuple[list[MetricPoint], int]:
        """What a live view has not seen yet: the points of ``keys`` at steps ``>= step_from`` whose row
        id is above ``after_id``, ordered by step (then as written), at most ``limit``; and the highest row
        id among them (``after_id`` when there are none). A run's points are written by its one job in
        step order, so ``(last step seen, highest id seen)`` marks exactly the points still to fetch; the
        step bound keeps the read on the ``(run_id, key, step)`` index."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return [], after_id
        query = (select(MetricRow.id, MetricRow.key, MetricRow.step, MetricRow.env_step, MetricRow.value,
                        MetricRow.wall_time)
                 .where(MetricRow.run_id == run_id, MetricRow.key.in_(wanted), MetricRow.step >= int(step_from),
                        MetricRow.id > int(after_id))
                 .order_by(MetricRow.step, MetricRow.id))
        if limit is not None:
            query = query.limit(int(limit))
        with self._read() as session:
            rows = session.execute(query).all()
        points = [MetricPoint(key=r.key, step=r.step, env_step=r.env_step, value=_value(r.value),
                              wall_time=r.wall_time) for r in rows]
        return points, max((r.id for r in rows), default=after_id)

    def latest_metrics(self, run_id: int, keys: Iterable[str] | None = None) -> dict[str, MetricPoint]:
        """The last-logged point (highest step) of each key (all keys when ``keys`` is None)."""
        with self._read() as session:
            wanted = self.within(session).metric_keys(run_id) if keys is None else list(dict.fromkeys(keys))
            out: dict[str, MetricPoint] = {}
            for key in wanted:
                row = session.execute(
                    select(MetricRow.step, MetricRow.env_step, MetricRow.value, MetricRow.wall_time)
                    .where(MetricRow.run_id == run_id, MetricRow.key == key)
                    .order_by(MetricRow.step.desc(), MetricRow.id.desc()).limit(1)).first()
                if row is not None:
                    out[key] = MetricPoint(key=key, step=row.step, env_step=row.env_step, value=_value(row.value),
                                           wall_time=row.wall_time)
            return out

    def iter_metrics(self, run_id: int, keys: Iterable[str] | None = None, *,
                     batch_size: int = 10_000) -> Iterator[MetricPoint]:
        """Every stored point of a run ordered by key and step, read in batches (for exports) on a
        connection of its own."""
        return self.iter_points(MetricRow.run_id == run_id, keys, batch_size=batch_size)

    def iter_points(self, where: ColumnElement[bool], keys: Iterable[str] | None = None, *,
                    batch_size: int = 10_000) -> Iterator[MetricPoint]:
        """Every stored point matching ``where`` ordered by key and step, read in batches on a
        connection of its own."""
        query = (select(MetricRow.key, MetricRow.step, MetricRow.env_step, MetricRow.value, MetricRow.wall_time)
                 .where(where).order_by(MetricRow.key, MetricRow.step, MetricRow.id))
        if keys is not None:
            query = query.where(MetricRow.key.in_(list(keys)))
        with self.engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=batch_size).execute(query)
            for row in result:
                yield MetricPoint(key=row.key, step=row.step, env_step=row.env_step, value=_value(row.value),
                                  wall_time=row.wall_time)

    def stream_metrics_csv(self, run_id: int, keys: Iterable[str] | None = None) -> Iterator[str]:
        """All points as CSV text (header ``key,step,env_step,value,wall_time``) in chunks, read in
        batches (for downloads of large runs)."""
        return iter_csv(self.iter_metrics(run_id, keys))

    def stream_metrics_jsonl(self, run_id: int, keys: Iterable[str] | None = None) -> Iterator[str]:
        """All points as JSON lines (one object per point), read in batches."""
        return iter_jsonl(self.iter_metrics(run_id, keys))
