"""Server-side downsampling of a metric series (the SQL lives here; bucket math is pure).

The x range ``[lo, hi]`` is cut into ``n`` equal buckets; bucket ``b`` holds the points with
``floor((x - lo) * n / (hi - lo)) == b`` (the point at ``hi`` joins the last bucket). From each bucket
the point with the smallest and the one with the largest value are kept, and the first and last
point of the range always are, so a one-step spike survives any zoom level. The database does the
grouping: only the kept points travel to Python.

Along ``step``, ranges wide enough for the rollup table are answered from it instead
(:mod:`db.rollups`, buckets made of whole power-of-two blocks); this module answers the rest.
Two plans compute the same buckets. Along ``step`` (the indexed axis) a CTE lists the buckets' integer
step ranges and, per bucket, one index range seek picks the min and the max row: no sort of the whole
series, index-only on the ``(run_id, key, step, value)`` index (about 0.4 s for 1M points on SQLite).
Along ``wall_time`` the same per-bucket seeks run on the ``(run_id, key, wall_time, value, step)``
index, between float bucket bounds found exactly (:func:`float_bucket_bounds`). Along ``env_step``
(not indexed), and as the reference plan for every axis, the points are grouped by a computed bucket
number.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import Float, Integer, and_, case, cast, func, literal, select, text, union_all
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement, Select

from db.models import MetricRow

MAX_SEEK_BUCKETS = 4000
"""More wall-time buckets than this (two bound parameters each) are grouped instead of sought."""

X_COLUMNS = {"step": MetricRow.step, "env_step": MetricRow.env_step, "wall_time": MetricRow.wall_time}


def x_column(x: str) -> Any:
    """The metrics column used as x-axis ``x`` (``step``, ``env_step`` or ``wall_time``)."""
    try:
        return X_COLUMNS[x]
    except KeyError:
        raise ValueError(f"unknown x-axis {x!r}; use one of: {', '.join(X_COLUMNS)}") from None


def bucket_count(max_points: int) -> int:
    """How many buckets fit in ``max_points``: two points each, plus the first and the last point."""
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4 (first, last and one bucket's min and max), got {max_points}")
    return (max_points - 2) // 2


def bucket_of(x: float, lo: float, hi: float, n: int) -> int:
    """The bucket index of ``x`` (the pure twin of the SQL expression, for tests and reasoning)."""
    if hi <= lo:
        return 0
    return min(n - 1, math.floor((x - lo) * n / (hi - lo)))


def in_range(run_id: int, key: str, x: str, x_min: float | None, x_max: float | None, *,
             step_min: int | None = None, step_max: int | None = None) -> ColumnElement[bool]:
    """The WHERE clause for one series: this run and key, x present, inside the requested range (and,
    along another axis than ``step``, inside the step range ``[step_min, step_max]`` when given)."""
    col = x_column(x)
    conditions = [MetricRow.run_id == run_id, MetricRow.key == key, col.is_not(None), MetricRow.value.is_not(None)]
    # Along wall_time, the step bounds are read from the wall-time index (step is in it); written as
    # ``step + 0`` they keep SQLite from choosing the step index for them and looking up every row.
    step = MetricRow.step + 0 if x == "wall_time" else MetricRow.step
    if step_min is not None:
        conditions.append(step >= int(step_min))
    if step_max is not None:
        conditions.append(step <= int(step_max))
    if x != "wall_time":
        # Integer axes get integer bounds: comparing an integer column with a float would keep
        # PostgreSQL from using the index for the range.
        x_min = None if x_min is None else math.ceil(x_min)
        x_max = None if x_max is None else math.floor(x_max)
    if x_min is not None:
        conditions.append(col >= x_min)
    if x_max is not None:
        conditions.append(col <= x_max)
    return and_(*conditions)


def _bucket_expr(col: Any, lo: float, hi: float, n: int, dialect: str) -> Any:
    scaled = (cast(col, Float) - literal(float(lo), Float)) * literal(float(n), Float) / literal(float(hi - lo), Float)
    # SQLite's CAST truncates toward zero (= floor here, x >= lo); PostgreSQL's rounds, so floor there.
    raw = cast(scaled, Integer) if dialect == "sqlite" else cast(func.floor(scaled), Integer)
    return case((raw >= n, n - 1), else_=raw)


def kept_points(session: Session, where: ColumnElement[bool], *, run_id: int, key: str, x: str, lo: float,
                hi: float, n: int, step_min: int | None = None, step_max: int | None = None,
                grouped: bool = False) -> list[tuple[float, float]]:
    """The (x, value) pairs kept from the range: first, last, and each bucket's min and max.
    ``step_min`` / ``step_max`` are the step bounds already in ``where``; ``grouped`` forces the plan
    that groups every point of the range (the reference the index seeks are checked against)."""
    col = x_column(x)
    if hi <= lo:
        n = 1
    if x == "step" and not grouped:
        pairs = _step_bucket_extremes(session, run_id=run_id, key=key, lo=lo, hi=hi, n=n)
    elif x == "wall_time" and not grouped and math.isfinite(lo) and math.isfinite(hi) and n <= MAX_SEEK_BUCKETS:
        pairs = wall_range_extremes(session, run_id=run_id, key=key, bounds=float_bucket_bounds(lo, hi, n),
                                    step_min=step_min, step_max=step_max)
    else:
        pairs = _grouped_bucket_extremes(session, where, col, lo=lo, hi=hi, n=n)
    kept = {(float(px), float(pv)) for px, pv in pairs if pv is not None}
    first = session.execute(select(col, MetricRow.value).where(where).order_by(col.asc(), MetricRow.id.asc())
                            .limit(1)).first()
    last = session.execute(select(col, MetricRow.value).where(where).order_by(col.desc(), MetricRow.id.desc())
                           .limit(1)).first()
    for point in (first, last):
        if point is not None:
            kept.add((float(point[0]), float(point[1])))
    return sorted(kept)


def step_bucket_bounds(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """Half-open integer step ranges ``[start, stop)`` of the non-empty buckets, exactly the steps
    :func:`bucket_of` puts in each bucket (integer arithmetic: no rounding at the edges)."""
    span = hi - lo
    if span <= 0:
        return [(lo, hi + 1)]
    # smallest step of bucket b: lo + ceil(b * span / n)
    starts = [lo + -((-b * span) // n) for b in range(n)] + [hi + 1]
    return [(a, z) for a, z in zip(starts, starts[1:], strict=False) if z > a]


def float_bucket_bounds(lo: float, hi: float, n: int) -> list[tuple[float, float]]:
    """Half-open float ranges ``[start, stop)`` of the non-empty buckets of ``[lo, hi]``: exactly the
    x values :func:`bucket_of` puts in each bucket, rounding included (each start is the smallest
    double of its bucket; the last stop is the double after ``hi``)."""
    top = math.nextafter(hi, math.inf)
    if hi <= lo:
        return [(lo, top)]
    starts = [lo, *(_first_of_bucket(b, lo, hi, n) for b in range(1, n)), top]
    return [(a, z) for a, z in zip(starts, starts[1:], strict=False) if z > a]


def _first_of_bucket(b: int, lo: float, hi: float, n: int) -> float:
    """The smallest double ``x`` in ``[lo, hi]`` with ``bucket_of(x) >= b`` (``1 <= b < n``)."""

    def reached(x: float) -> bool:
        return math.floor((x - lo) * n / (hi - lo)) >= b

    # The exact quotient is a few doubles away from the threshold: walk there from it.
    x = min(max(lo + (hi - lo) * b / n, lo), hi)
    for _ in range(64):
        if reached(x):
            below = math.nextafter(x, -math.inf)
            if below < lo or not reached(below):
                return x
            x = below
        else:
            x = math.nextafter(x, math.inf)
    # Far from it (a range crossing zero, say): bisect between doubles, lo never reached, hi always.
    low, high = lo, hi
    while math.nextafter(low, math.inf) < high:
        mid = low + (high - low) / 2
        if mid <= low or mid >= high:
            mid = math.nextafter(low, math.inf)
        low, high = (low, mid) if reached(mid) else (mid, high)
    return high


def _step_bucket_sql(dialect: str, bounds: list[tuple[int, int]]) -> str:
    # The bounds are integers computed here, so they are written into the statement: integer
    # comparisons keep the (run_id, key, step, value) index usable on every backend.
    values = ", ".join(f"({int(a)}, {int(z)})" for a, z in bounds)
    bucket_range = ("m.run_id = :run_id AND m.key = :key AND m.value IS NOT NULL"
                    " AND m.step >= bk.lo AND m.step < bk.hi")
    return _bucket_extremes_sql(dialect, values, bucket_range, "step",
                                ("CAST(m.step AS DOUBLE PRECISION)", "-CAST(m.step AS DOUBLE PRECISION)"))


def _bucket_extremes_sql(dialect: str, values: str, bucket_range: str, column: str,
                         pg_keys: tuple[str, str]) -> str:
    """Per bucket of ``values`` (``(lo, hi)`` rows), the row of the smallest and of the largest value
    among the metrics matching ``bucket_range``; ``column`` is the axis read back (``step``,
    ``wall_time``), ``pg_keys`` its expression for the low and the (negated) high aggregate."""
    if dialect == "sqlite":
        # SQLite fills a bare column from the row holding the single min()/max(): one pass, no sort;
        # the rowid is part of every index entry, so this stays index-only.
        pick = "(SELECT i FROM (SELECT m.id AS i, {agg}(m.value) FROM metrics m WHERE " + bucket_range + "))"
        low, high = pick.format(agg="MIN"), pick.format(agg="MAX")
        return (f"WITH bk(lo, hi) AS (VALUES {values}) SELECT {column}, value FROM metrics"
                f" WHERE id IN (SELECT {low} FROM bk UNION ALL SELECT {high} FROM bk)")
    # PostgreSQL: one index-only pass per bucket; min/max over (value, axis) arrays compare value first,
    # then the axis, so each aggregate carries the axis value of its extreme (the earliest on ties).
    return (f"WITH bk(lo, hi) AS (VALUES {values}) "
            "SELECT p.low, p.high FROM bk CROSS JOIN LATERAL (SELECT"
            f" min(ARRAY[m.value, {pg_keys[0]}]) AS low, max(ARRAY[m.value, {pg_keys[1]}]) AS high"
            " FROM metrics m WHERE " + bucket_range + ") AS p")


def _step_bucket_extremes(session: Session, *, run_id: int, key: str, lo: float, hi: float,
                          n: int) -> list[tuple[Any, Any]]:
    return step_range_extremes(session, run_id=run_id, key=key, bounds=step_bucket_bounds(int(lo), int(hi), n))


def step_range_extremes(session: Session, *, run_id: int, key: str,
                        bounds: list[tuple[int, int]]) -> list[tuple[Any, Any]]:
    """The (step, value) of the smallest and of the largest value (earliest step on ties) in each
    half-open step range ``[start, stop)`` of ``bounds``, read from the metrics table's index."""
    dialect = session.get_bind().dialect.name
    sql = _step_bucket_sql(dialect, bounds)
    if dialect == "postgresql":
        # The planner's cost estimate for this small query is high enough to trigger JIT compilation,
        # which costs more (~0.3 s) than the query itself.
        session.execute(text("SET LOCAL jit = off"))
    rows = session.execute(text(sql), {"run_id": run_id, "key": key}).all()
    if dialect == "sqlite":
        return [tuple(row) for row in rows]
    pairs: list[tuple[Any, Any]] = []
    for low, high in rows:
        if low is not None:  # an empty bucket yields NULL aggregates
            pairs.append((low[1], low[0]))
            pairs.append((-high[1], high[0]))
    return pairs


def _wall_bucket_sql(dialect: str, mark: str, count: int, step_min: int | None, step_max: int | None) -> str:
    """The per-bucket seeks along wall_time; parameters in order: the bounds (two per bucket), then run
    id, key and the step bounds given, once per aggregate."""
    cast = "{}" if dialect == "sqlite" else "CAST({} AS DOUBLE PRECISION)"
    values = ", ".join(f"({cast.format(mark)}, {cast.format(mark)})" for _ in range(count))
    bucket_range = (f"m.run_id = {mark} AND m.key = {mark} AND m.value IS NOT NULL"
                    " AND m.wall_time >= bk.lo AND m.wall_time < bk.hi")
    if step_min is not None:
        bucket_range += f" AND m.step >= {mark}"
    if step_max is not None:
        bucket_range += f" AND m.step <= {mark}"
    return _bucket_extremes_sql(dialect, values, bucket_range, "wall_time", ("m.wall_time", "-m.wall_time"))


_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def wall_range_extremes(session: Session, *, run_id: int, key: str, bounds: list[tuple[float, float]],
                        step_min: int | None = None, step_max: int | None = None) -> list[tuple[Any, Any]]:
    """The (wall time, value) of the smallest and of the largest value in each half-open wall-time
    range of ``bounds`` (steps within ``[step_min, step_max]`` when given), one index range seek each
    on ``(run_id, key, wall_time, value, step)``."""
    conn = session.connection()
    dialect, mark = conn.dialect.name, _MARKS[conn.dialect.paramstyle]
    # Straight to the driver: the bounds are binary doubles (written out as text they could round), and
    # a thousand SQLAlchemy bind parameters would cost more than the query.
    per_aggregate = [run_id, key, *(bound for bound in (step_min, step_max) if bound is not None)]
    params = [float(v) for pair in bounds for v in pair] + per_aggregate * (2 if dialect == "sqlite" else 1)
    if dialect == "postgresql":
        conn.exec_driver_sql("SET LOCAL jit = off")  # see step_range_extremes
    rows = conn.exec_driver_sql(_wall_bucket_sql(dialect, mark, len(bounds), step_min, step_max),
                                tuple(params)).all()
    if dialect == "sqlite":
        return [tuple(row) for row in rows]
    pairs: list[tuple[Any, Any]] = []
    for low, high in rows:
        if low is not None:
            pairs.append((low[1], low[0]))
            pairs.append((-high[1], high[0]))
    return pairs


def _grouped_bucket_extremes(session: Session, where: ColumnElement[bool], col: Any, *, lo: float, hi: float,
                             n: int) -> list[tuple[Any, Any]]:
    dialect = session.get_bind().dialect.name
    bucket = literal(0, Integer) if hi <= lo else _bucket_expr(col, lo, hi, n, dialect)
    points = select(col.label("x"), MetricRow.value.label("v"), bucket.label("b")).where(where).subquery()
    if dialect == "sqlite":
        lows: Select[Any] = select(points.c.x, func.min(points.c.v)).group_by(points.c.b)
        highs: Select[Any] = select(points.c.x, func.max(points.c.v)).group_by(points.c.b)
        query: Any = union_all(lows, highs)
    else:
        ranked = select(
            points.c.x, points.c.v,
            func.row_number().over(partition_by=points.c.b, order_by=(points.c.v.asc(), points.c.x.asc())).label("lo"),
            func.row_number().over(partition_by=points.c.b, order_by=(points.c.v.desc(), points.c.x.asc())).label("hi"),
        ).subquery()
        query = select(ranked.c.x, ranked.c.v).where((ranked.c.lo == 1) | (ranked.c.hi == 1))
    return [tuple(row) for row in session.execute(query)]
