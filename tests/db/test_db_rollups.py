"""Metric rollups: the pure block math by hand, the table kept in step with the points, wide series
answered through it equal to the same buckets computed from the metrics table, and the backfill of
migration 0002."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from sqlalchemy import insert

from db import rollups
from db.engine import make_engine, read_session
from db.migrate import upgrade
from db.models import ExperimentRow, MetricRow, RunRow
from db.records import MetricPoint
from db.rollups import Extremes, RollupPlan, aggregate, extremes_of, merge_blocks, plan
from db.store import Store


def test_extremes_merge_keeps_the_earliest_step_on_ties() -> None:
    a = Extremes(2, 1.0, 10, 5.0, 11)
    b = Extremes(3, 1.0, 4, 5.0, 3)
    assert a.merge(b) == Extremes(5, 1.0, 4, 5.0, 3)
    assert b.merge(a) == Extremes(5, 1.0, 4, 5.0, 3)
    assert a.merge(Extremes(1, -2.0, 99, 9.0, 98)) == Extremes(3, -2.0, 99, 9.0, 98)
    assert extremes_of([]) is None
    assert extremes_of([(7, 2.0), (8, -1.0), (9, 2.0)]) == Extremes(3, -1.0, 8, 2.0, 7)


def test_aggregate_by_hand() -> None:
    points = [("a", 0, 1.0), ("a", 15, 3.0), ("a", 16, -2.0), ("a", 20, None), ("b", 255, 0.5), ("b", 256, 0.25)]
    got = aggregate(points, levels=(4, 8))
    assert got == {
        ("a", 4, 0): Extremes(2, 1.0, 0, 3.0, 15),     # steps 0..15
        ("a", 4, 1): Extremes(1, -2.0, 16, -2.0, 16),  # steps 16..31 (the NaN at 20 is left out)
        ("a", 8, 0): Extremes(3, -2.0, 16, 3.0, 15),   # steps 0..255
        ("b", 4, 15): Extremes(1, 0.5, 255, 0.5, 255),
        ("b", 4, 16): Extremes(1, 0.25, 256, 0.25, 256),
        ("b", 8, 0): Extremes(1, 0.5, 255, 0.5, 255),
        ("b", 8, 1): Extremes(1, 0.25, 256, 0.25, 256),
    }


def test_plan_by_hand() -> None:
    # 32768 steps into 5 buckets: level 12 (4096-step blocks 0..7) is the coarsest with >= 5 blocks.
    p = plan(0, 32767, 5)
    assert p == RollupPlan(level=12, block_ranges=((0, 2), (2, 3), (3, 5), (5, 6), (6, 8)))
    assert p.step_bounds(0, 32767) == [(0, 8192), (8192, 12288), (12288, 20480), (20480, 24576), (24576, 32768)]
    assert p.step_bounds(100, 30000)[0] == (100, 8192) and p.step_bounds(100, 30000)[-1] == (24576, 30001)
    # an offset range of 20000 steps: 256 * 78 <= 20000, so 78 buckets get blocks of 256 steps,
    # 1000 >> 8 = 3 .. 20999 >> 8 = 82: 80 blocks shared out over 78 buckets (two get a second block)
    q = plan(1000, 20999, 78)
    assert q is not None and q.level == 8 and (q.first_block, q.last_block) == (3, 82)
    assert len(q.block_ranges) == 78 and sorted(z - a for a, z in q.block_ranges)[-3:] == [1, 2, 2]
    assert plan(1000, 20999, 80).level == 4  # 256 * 80 > 20000: the next finer level
    # too narrow: fewer than MIN_SPAN steps, or fewer than 16 steps per bucket
    assert plan(0, rollups.MIN_SPAN - 2, 5) is None
    assert plan(0, 100_000, 10_000) is None
    with pytest.raises(ValueError, match="at least one bucket"):
        plan(0, 100, 0)


def test_merge_blocks_by_hand() -> None:
    p = RollupPlan(level=4, block_ranges=((0, 2), (2, 3)))
    merged = merge_blocks(p, [(0, Extremes(1, 5.0, 3, 5.0, 3)), (1, Extremes(2, 1.0, 20, 9.0, 17)),
                              (2, Extremes(1, 4.0, 40, 4.0, 40))])
    assert merged == {0: Extremes(3, 1.0, 20, 9.0, 17), 1: Extremes(1, 4.0, 40, 4.0, 40)}


def _blocks(store: Store, run_id: int, key: str, level: int) -> dict[tuple[str, int, int], Extremes]:
    with read_session(store.engine) as s:
        return {(key, level, b): e for b, e in rollups.read_blocks(s, run_id=run_id, key=key, level=level,
                                                                      first=-(1 << 40), last=1 << 40)}


def test_every_write_path_keeps_the_rollups_equal_to_the_points(store: Store, run_id: int) -> None:
    rng = random.Random(3)
    written: list[tuple[str, int, float | None]] = []
    for step in range(0, 700, 7):  # log_step: one upsert per block per step
        value = rng.choice([rng.random(), 0.5, math.nan])  # repeated values test the tie rule
        store.log_step(run_id, step, step, {"k": value})
        written.append(("k", step, None if math.isnan(value) else value))
    store.log_metrics(run_id, 140, None, {"k": -3.0})  # a second point at an existing step
    written.append(("k", 140, -3.0))
    imported = [MetricPoint("k", s, s, rng.random(), 0.0) for s in range(650, 900)]
    store.import_metrics(run_id, imported)
    written += [("k", p.step, p.value) for p in imported]
    expected = aggregate(written)
    got: dict[tuple[str, int, int], Extremes] = {}
    for level in rollups.LEVELS:
        got |= _blocks(store, run_id, "k", level)
    assert got == expected
    assert got[("k", 4, 8)].min_value == -3.0  # step 140 is in block 8 of 16 steps


def _wide_run(store: Store, run_id: int, *, steps: int = 24_000, seed: int = 11) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    points = [(s, round(rng.gauss(0.0, 1.0), 3)) for s in range(0, steps) if rng.random() < 0.8]
    points[len(points) // 3] = (points[len(points) // 3][0], 1000.0)  # a one-step spike
    store.import_metrics(run_id, (MetricPoint("r", s, s, v, float(s)) for s, v in points))
    return points


@pytest.mark.parametrize(("x_min", "x_max", "max_points"), [
    (None, None, 1000), (None, None, 12), (1234.5, None, 200), (None, 22_001, 200), (517, 22_999, 300),
    (0, 16_500, 40),
])
def test_wide_series_through_rollups_equal_the_metrics_table(store: Store, run_id: int, x_min, x_max,
                                                             max_points) -> None:
    points = _wide_run(store, run_id)
    with read_session(store.engine) as s:
        fast = store.within(s).series(run_id, "r", x="step", max_points=max_points, x_min=x_min, x_max=x_max)
        raw = store.within(s).series(run_id, "r", x="step", max_points=max_points, x_min=x_min, x_max=x_max,
                                     source="raw")
    assert fast == raw
    inside = [(s, v) for s, v in points if (x_min is None or s >= x_min) and (x_max is None or s <= x_max)]
    assert fast.downsampled and fast.total_points == len(inside) and len(fast) <= max_points
    assert (fast.xs[0], fast.ys[0]) == inside[0] and (fast.xs[-1], fast.ys[-1]) == inside[-1]
    stored = set(points)
    assert all((int(x), y) in stored for x, y in zip(fast.xs, fast.ys, strict=True))  # only real points
    if x_min is None and x_max is None:
        assert 1000.0 in fast.ys  # the spike survives


def test_wide_series_by_hand(store: Store, run_id: int) -> None:
    # steps 0..32767 with value = step, a spike at 10000 and a dip at 30000; 5 buckets (see plan_by_hand)
    def value(s: int) -> float:
        return 1e6 if s == 10_000 else -5.0 if s == 30_000 else float(s)

    store.import_metrics(run_id, (MetricPoint("v", s, None, value(s), 0.0) for s in range(32_768)))
    got = store.series(run_id, "v", max_points=12)
    # the last bucket's maximum is the last point, and its minimum the dip
    assert got.xs == (0, 8191, 8192, 10_000, 12_288, 20_479, 20_480, 24_575, 30_000, 32_767)
    assert got.ys == tuple(value(int(s)) for s in got.xs)
    assert (got.total_points, got.downsampled) == (32_768, True)


def test_a_wide_but_sparse_range_comes_back_whole(store: Store, run_id: int) -> None:
    store.import_metrics(run_id, (MetricPoint("s", s, None, float(s % 7), 0.0) for s in range(0, 100_000, 1000)))
    got = store.series(run_id, "s", max_points=1000)
    assert got.xs == tuple(float(s) for s in range(0, 100_000, 1000)) and not got.downsampled


def test_deleting_a_run_deletes_its_rollups(store: Store, experiment_id: int) -> None:
    run = store.create_run(experiment_id, {}, "cpu")
    store.log_step(run.id, 3, 3, {"k": 1.0})
    assert _blocks(store, run.id, "k", 4)
    store.delete_run(run.id, force=True)
    assert _blocks(store, run.id, "k", 4) == {}


def test_migration_0002_backfills_rollups_from_stored_points(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0001")
    rng = random.Random(5)
    points = [("k", s, rng.choice([None, 0.25, rng.random()])) for s in range(0, 3000, 3)]
    points += [("j", s, float(-s)) for s in range(70_000, 70_050)]
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(insert(ExperimentRow), [{"id": 1, "name": "old", "description": "", "tags": [], "config": {},
                                              "created_at": _epoch(), "updated_at": _epoch()}])
        conn.execute(insert(RunRow), [{"id": 1, "experiment_id": 1, "attempt": 1, "status": "succeeded",
                                       "config": {}, "queue": "cpu", "created_at": _epoch(), "stop_requested": False,
                                       "tags": [], "notes": "", "step": 0, "env_step": 0}])
        conn.execute(insert(MetricRow), [{"run_id": 1, "key": k, "step": s, "env_step": s, "value": v,
                                          "wall_time": 0.0} for k, s, v in points])
    engine.dispose()
    upgrade(url)
    with Store(url) as store:
        got: dict[tuple[str, int, int], Extremes] = {}
        for key in ("k", "j"):
            for level in rollups.LEVELS:
                got |= _blocks(store, 1, key, level)
    assert got == aggregate(points)


def _epoch():
    from datetime import UTC, datetime

    return datetime(2026, 1, 1, tzinfo=UTC)
