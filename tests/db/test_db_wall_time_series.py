"""Series along wall time: per-bucket seeks on the wall-time index, equal to grouping every point (the
slow reference) and to a Python reference, with exact float bucket bounds, at a cost close to the
step axis's."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from db.downsample import bucket_count, bucket_of, float_bucket_bounds
from db.engine import read_session
from db.records import MetricPoint, Series
from db.store import Store


def test_float_bucket_bounds_by_hand() -> None:
    assert float_bucket_bounds(0.0, 10.0, 5) == [(0.0, 2.0), (2.0, 4.0), (4.0, 6.0), (6.0, 8.0),
                                                 (8.0, math.nextafter(10.0, math.inf))]
    assert float_bucket_bounds(3.5, 3.5, 4) == [(3.5, math.nextafter(3.5, math.inf))]
    # 0.3 is not a double: the bound is the first double bucket_of puts in the next bucket.
    (_, z), (a, _) = float_bucket_bounds(0.0, 0.9, 3)[:2]
    assert z == a and bucket_of(a, 0.0, 0.9, 3) == 1 and bucket_of(math.nextafter(a, 0.0), 0.0, 0.9, 3) == 0


@given(lo=st.floats(-1e10, 2e9, allow_nan=False), span=st.floats(1e-6, 1e7), n=st.integers(1, 600))
def test_float_bucket_bounds_agree_with_bucket_of(lo: float, span: float, n: int) -> None:
    hi = lo + span
    if hi <= lo:
        return
    bounds = float_bucket_bounds(lo, hi, n)
    assert bounds[0][0] == lo and bounds[-1][1] == math.nextafter(hi, math.inf)
    for (a, z), (a2, _) in zip(bounds, bounds[1:], strict=False):
        assert z == a2  # contiguous
        inside = math.nextafter(z, -math.inf)
        assert bucket_of(a, lo, hi, n) == bucket_of(inside, lo, hi, n) != bucket_of(z, lo, hi, n)


def _reference(points: list[tuple[float, float, int]], n: int) -> set[tuple[float, float]]:
    """First and last (the earliest, the latest stored on ties) and each bucket's min and max of
    (wall, value, step) points in storage order."""
    lo, hi = min(p[0] for p in points), max(p[0] for p in points)
    buckets: dict[int, list[tuple[float, float]]] = {}
    for x, v, _ in points:
        buckets.setdefault(bucket_of(x, lo, hi, n), []).append((x, v))
    order = range(len(points))
    first = min(order, key=lambda i: (points[i][0], i))
    last = max(order, key=lambda i: (points[i][0], i))
    kept = {points[first][:2], points[last][:2]}
    for group in buckets.values():
        kept.add(min(group, key=lambda p: p[1]))
        kept.add(max(group, key=lambda p: p[1]))
    return kept


def _irregular_run(store: Store, run_id: int) -> list[tuple[float, float, int]]:
    """3000 points of key "k": wall times rising with jitter, shared by runs of steps, one stretch logged
    out of order (not monotone in step), distinct values; another key interleaved."""
    rng = random.Random(5)
    points, wall = [], 1.7e9
    for step in range(3000):
        if rng.random() < 0.7:
            wall += rng.expovariate(1 / 0.37)
        points.append((wall - 500.0 if 1200 <= step < 1400 else wall, rng.random(), step))
    store.import_metrics(run_id, (MetricPoint(key, step, 4 * step, v if key == "k" else -v, x)
                                  for x, v, step in points for key in ("k", "other")))
    return points


@pytest.mark.parametrize(("max_points", "x_min", "x_max", "step_min", "step_max"), [
    (1000, None, None, None, None), (12, None, None, None, None), (200, 1.7e9 + 100.25, None, None, None),
    (300, None, 1.7e9 + 700.0, None, None), (100, 1.7e9 + 50.5, 1.7e9 + 800.5, None, None),
    (100, None, None, 1000, 2500), (40, 1.7e9 + 10.0, None, 600, None),
])
def test_wall_time_series_equals_the_grouped_reference(store: Store, run_id: int, max_points: int, x_min, x_max,
                                                       step_min, step_max) -> None:
    points = _irregular_run(store, run_id)
    kw = {"x": "wall_time", "max_points": max_points, "x_min": x_min, "x_max": x_max, "step_min": step_min,
          "step_max": step_max}
    with read_session(store.engine) as s:
        fast = store.within(s).series(run_id, "k", **kw)
        grouped = store.within(s).series(run_id, "k", source="grouped", **kw)
    assert fast == grouped
    inside = [p for p in points if (x_min is None or p[0] >= x_min) and (x_max is None or p[0] <= x_max)
              and (step_min is None or p[2] >= step_min) and (step_max is None or p[2] <= step_max)]
    assert fast.total_points == len(inside) and fast.downsampled and len(fast) <= max_points
    assert set(zip(fast.xs, fast.ys, strict=True)) == _reference(inside, bucket_count(max_points))
    assert fast.xs == tuple(sorted(fast.xs))


def _vm_steps(store: Store, run_id: int, **kw) -> tuple[int, Series]:
    """SQLite virtual-machine instructions (in thousands) that one series query runs: its work, whatever
    else the machine is doing."""
    with read_session(store.engine) as s:
        raw = s.connection().connection.dbapi_connection
        calls = [0]

        def count() -> int:
            calls[0] += 1
            return 0

        raw.set_progress_handler(count, 1000)
        try:
            result = store.within(s).series(run_id, "k", x_min=None, x_max=None, **kw)
        finally:
            raw.set_progress_handler(None, 1000)
    return calls[0], result


def test_a_wall_time_series_costs_about_what_the_step_series_costs(sqlite_store: Store) -> None:
    run_id = sqlite_store.create_run(sqlite_store.create_experiment("e").id, {}, "cpu").id
    _irregular_run(sqlite_store, run_id)
    step_work, by_step = _vm_steps(sqlite_store, run_id, x="step", max_points=200)
    wall_work, by_wall = _vm_steps(sqlite_store, run_id, x="wall_time", max_points=200)
    grouped_work, _ = _vm_steps(sqlite_store, run_id, x="wall_time", max_points=200, source="grouped")
    assert by_step.total_points == by_wall.total_points == 3000
    assert wall_work <= 2 * step_work and wall_work < grouped_work, (step_work, wall_work, grouped_work)
