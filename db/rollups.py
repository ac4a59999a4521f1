"""Multi-resolution rollups of metric series: what makes a whole-run series query cheap.

For every run and key, the ``metric_rollups`` table keeps one row per block of ``2**level`` steps
(``bucket = step >> level``) at each level of :data:`LEVELS`: the number of non-NaN points in the
block and its smallest and largest value with their steps (the earliest step on ties, like the raw
plans in :mod:`db.downsample`). The rows are written in the same transaction as the points
(``log_step``, ``log_metrics``, ``import_metrics``), so a reader never sees one without the other.

A wide series query (at least :data:`MIN_SPAN` steps and ``2**LEVELS[0]`` steps per bucket) cuts the range into buckets made of
whole blocks of the coarsest level that still gives every bucket at least one block, reads at most
about ``16 * n`` rollup rows instead of every point, and merges them per bucket here. A block that a
requested range cuts through is read from the metrics table instead, so answers stay exact: every
kept point is a stored point, and each bucket's minimum and maximum are the true ones. Narrower
ranges are answered from the metrics table alone (:mod:`db.downsample`).

The bucketing math and the merging are pure functions (tested by hand); the SQL is at the bottom.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, or_, select, text
from sqlalchemy.orm import Session

from db.downsample import step_bucket_bounds
from db.models import MetricRollupRow

LEVELS: tuple[int, ...] = (4, 8, 12)
"""Block sizes of 16, 256 and 4096 steps: three rollup rows per written point, and a query reads at
most 16 blocks per bucket (the ratio between neighbouring levels) up to ``4096 * 16 * n`` steps (32M
steps for 1000 points), proportionally more beyond."""

MIN_SPAN = 1 << 14
"""Ranges of fewer steps are answered from the metrics table (equal-width buckets, a few tens of
milliseconds at most); wider ones through the rollups."""


@dataclass(frozen=True)
class Extremes:
    """A block's or a bucket's point count and its smallest and largest (value, step)."""

    count: int
    min_value: float
    min_step: int
    max_value: float
    max_step: int

    def merge(self, other: Extremes) -> Extremes:
        """Both together: the smaller minimum and the larger maximum, earliest step on ties."""
        low = min((self.min_value, self.min_step), (other.min_value, other.min_step))
        high = max((self.max_value, -self.max_step), (other.max_value, -other.max_step))
        return Extremes(self.count + other.count, low[0], low[1], high[0], -high[1])


@dataclass(frozen=True)
class RollupPlan:
    """How a wide step range ``[lo, hi]`` is bucketed: blocks of ``2**level`` steps, bucket ``j``
    made of the blocks ``block_ranges[j] = [first, stop)``."""

    level: int
    block_ranges: tuple[tuple[int, int], ...]

    @property
    def first_block(self) -> int:
        return self.block_ranges[0][0]

    @property
    def last_block(self) -> int:
        return self.block_ranges[-1][1] - 1

    def step_bounds(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Each bucket's half-open step range ``[start, stop)``, clipped to ``[lo, hi]``."""
        return [(max(lo, a << self.level), min(hi + 1, z << self.level)) for a, z in self.block_ranges]


def plan(lo: int, hi: int, n: int, levels: Sequence[int] = LEVELS, min_span: int = MIN_SPAN) -> RollupPlan | None:
    """The bucketing of ``[lo, hi]`` into at most ``n`` buckets of whole blocks, or None when the
    range spans fewer than ``min_span`` steps or is too narrow for the finest level (fewer than
    ``2**levels[0]`` steps per bucket): then the metrics table answers directly.

    The level is the coarsest whose blocks still number at least ``n`` in the range; the blocks are
    shared out over ``n`` buckets as evenly as whole blocks allow (sizes differ by at most one).
    """
    if n < 1:
        raise ValueError(f"a series needs at least one bucket, got {n}")
    span = hi - lo + 1
    if span < min_span:
        return None
    usable = [level for level in levels if (1 << level) * n <= span]
    if not usable:
        return None
    level = max(usable)
    first, last = lo >> level, hi >> level
    return RollupPlan(level=level, block_ranges=tuple(step_bucket_bounds(first, last, n)))


def aggregate(points: Iterable[tuple[str, int, float | None]], levels: Sequence[int] = LEVELS
              ) -> dict[tuple[str, int, int], Extremes]:
    """Rollup rows for a batch of ``(key, step, value)`` points: one per (key, level, block) they
    touch. NaN points (value None) are left out, as every series leaves them out."""
    # Plain lists updated in place: this runs for every written point, so it avoids objects per point.
    acc: dict[tuple[str, int, int], list[Any]] = {}
    for key, step, value in points:
        if value is None:
            continue
        for level in levels:
            slot = (key, level, step >> level)
            a = acc.get(slot)
            if a is None:
                acc[slot] = [1, value, step, value, step]
                continue
            a[0] += 1
            if value < a[1] or (value == a[1] and step < a[2]):
                a[1], a[2] = value, step
            if value > a[3] or (value == a[3] and step < a[4]):
                a[3], a[4] = value, step
    return {slot: Extremes(*a) for slot, a in acc.items()}


def extremes_of(points: Iterable[tuple[int, float]]) -> Extremes | None:
    """The extremes of some ``(step, value)`` points, or None when there are none."""
    out: Extremes | None = None
    for step, value in points:
        one = Extremes(1, value, step, value, step)
        out = one if out is None else out.merge(one)
    return out


def merge_blocks(plan_: RollupPlan, blocks: Iterable[tuple[int, Extremes]]) -> dict[int, Extremes]:
    """Per bucket index, the merged extremes of the ``(block, extremes)`` pairs that fall in it."""
    starts = [a for a, _ in plan_.block_ranges]
    buckets: dict[int, Extremes] = {}
    for block, ext in blocks:
        j = bisect.bisect_right(starts, block) - 1
        seen = buckets.get(j)
        buckets[j] = ext if seen is None else seen.merge(ext)
    return buckets


# ------------------------------------------------------------------------------------------ SQL


_COLUMNS = ("run_id", "key", "level", "bucket", "count", "min_value", "min_step", "max_value", "max_step")


def _upsert(insert: Any) -> Any:
    """``INSERT ... ON CONFLICT DO UPDATE`` merging a new block into the stored one: counts add up,
    the smaller minimum and the larger maximum win (the earlier step on ties)."""
    table = MetricRollupRow.__table__
    stmt = insert(table)
    new, old = stmt.excluded, table.c
    lower = or_(new.min_value < old.min_value, and_(new.min_value == old.min_value, new.min_step < old.min_step))
    higher = or_(new.max_value > old.max_value, and_(new.max_value == old.max_value, new.max_step < old.max_step))
    return stmt.on_conflict_do_update(
        index_elements=["run_id", "key", "level", "bucket"],
        set_={
            "count": old.count + new.count,
            "min_value": case((lower, new.min_value), else_=old.min_value),
            "min_step": case((lower, new.min_step), else_=old.min_step),
            "max_value": case((higher, new.max_value), else_=old.max_value),
            "max_step": case((higher, new.max_step), else_=old.max_step),
        },
    )


_PG_TYPES = ("INTEGER", "VARCHAR", "INTEGER", "INTEGER", "INTEGER", "DOUBLE PRECISION", "INTEGER",
             "DOUBLE PRECISION", "INTEGER")


@functools.cache
def _sqlite_upsert() -> str:
    """The SQLite upsert's text (compiled on first use: a process that writes no metrics, such as
    ``cooplab submit``, never loads the dialects)."""
    from sqlalchemy.dialects import sqlite

    return str(_upsert(sqlite.insert).compile(dialect=sqlite.dialect()))


@functools.cache
def _postgres_upsert() -> Any:
    """PostgreSQL gets every block in one statement (one array per column, unnested into rows): an
    executemany would run one upsert per row on the server."""
    from sqlalchemy.dialects import postgresql

    on_conflict = str(_upsert(postgresql.insert).compile(dialect=postgresql.dialect())).partition(" ON CONFLICT")
    return text(
        "INSERT INTO metric_rollups (" + ", ".join(f'"{c}"' for c in _COLUMNS) + ") SELECT * FROM unnest("
        + ", ".join(f"CAST(:{c} AS {t}[])" for c, t in zip(_COLUMNS, _PG_TYPES, strict=True)) + ")"
        + on_conflict[1] + on_conflict[2])


def write(session: Session, run_id: int, points: Iterable[tuple[str, int, float | None]]) -> None:
    """Fold a batch of points into the rollup table (one upsert per touched block)."""
    blocks = aggregate(points)
    if not blocks:
        return
    conn = session.connection()
    if conn.dialect.name == "sqlite":
        # Straight to the driver's executemany: this runs in every log_step, and building SQLAlchemy
        # parameters per row would cost more than the upsert itself.
        conn.exec_driver_sql(_sqlite_upsert(), [
            (run_id, key, level, bucket, e.count, e.min_value, e.min_step, e.max_value, e.max_step)
            for (key, level, bucket), e in blocks.items()])
        return
    rows = [(run_id, key, level, bucket, e.count, e.min_value, e.min_step, e.max_value, e.max_step)
            for (key, level, bucket), e in blocks.items()]
    conn.execute(_postgres_upsert(), {c: list(column) for c, column in zip(_COLUMNS, zip(*rows, strict=True),
                                                                          strict=True)})


def read_blocks(session: Session, *, run_id: int, key: str, level: int, first: int, last: int
                ) -> list[tuple[int, Extremes]]:
    """The stored blocks ``first..last`` of one key at one level (blocks without points have no row)."""
    r = MetricRollupRow
    rows = session.execute(
        select(r.bucket, r.count, r.min_value, r.min_step, r.max_value, r.max_step)
        .where(r.run_id == run_id, r.key == key, r.level == level, r.bucket >= first, r.bucket <= last)
    ).all()
    return [(int(b), Extremes(int(c), float(lv), int(ls), float(hv), int(hs))) for b, c, lv, ls, hv, hs in rows]
