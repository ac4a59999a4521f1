"""Downsampling: pure bucket math and the SQL plans, checked by hand and against a reference."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from db.downsample import bucket_count, bucket_of, step_bucket_bounds
from db.records import MetricPoint
from db.store import Store


def test_bucket_count_leaves_room_for_first_and_last() -> None:
    assert bucket_count(12) == 5  # 5 buckets * (min, max) + first + last = 12
    assert bucket_count(1000) == 499
    assert bucket_count(4) == 1
    with pytest.raises(ValueError, match="at least 4"):
        bucket_count(3)


def test_bucket_of_by_hand() -> None:
    assert [bucket_of(x, 0, 100, 5) for x in (0, 19.99, 20, 99, 100)] == [0, 0, 1, 4, 4]
    assert bucket_of(5, 5, 5, 3) == 0  # a single x value is one bucket


def test_step_bucket_bounds_by_hand() -> None:
    assert step_bucket_bounds(0, 9, 3) == [(0, 3), (3, 6), (6, 10)]
    assert step_bucket_bounds(0, 10, 4) == [(0, 3), (3, 5), (5, 8), (8, 11)]
    assert step_bucket_bounds(30, 69, 5) == [(30, 38), (38, 46), (46, 54), (54, 62), (62, 70)]
    assert step_bucket_bounds(0, 2, 5) == [(0, 1), (1, 2), (2, 3)]  # empty buckets are dropped
    assert step_bucket_bounds(7, 7, 5) == [(7, 8)]


@given(lo=st.integers(0, 10_000), span=st.integers(1, 5_000), n=st.integers(1, 600))
def test_step_bucket_bounds_agree_with_bucket_of(lo: int, span: int, n: int) -> None:
    hi = lo + span
    bounds = step_bucket_bounds(lo, hi, n)
    assert bounds[0][0] == lo and bounds[-1][1] == hi + 1
    for (a, z), (a2, _) in zip(bounds, bounds[1:], strict=False):
        assert z == a2  # contiguous
        assert bucket_of(a, lo, hi, n) == bucket_of(z - 1, lo, hi, n) != bucket_of(z, lo, hi, n)


def _sawtooth_with_spikes(store: Store, run_id: int) -> None:
    # 100 steps; values rise 0.00 .. 0.99 except a spike up at step 37 and a dip at step 62.
    points = [MetricPoint("r", s, 4 * s, 100.0 if s == 37 else -50.0 if s == 62 else s * 0.01, 1000.0 + 0.5 * s)
              for s in range(100)]
    assert store.import_metrics(run_id, points) == 100


@pytest.mark.parametrize(("axis", "scale", "offset"), [("step", 1, 0), ("env_step", 4, 0), ("wall_time", 0.5, 1000.0)])
def test_series_keeps_first_last_and_each_buckets_extremes(store: Store, run_id: int, axis: str, scale: float,
                                                           offset: float) -> None:
    _sawtooth_with_spikes(store, run_id)
    series = store.series(run_id, "r", x=axis, max_points=12)
    # 5 buckets of 20 steps: [0,20) [20,40) [40,60) [60,80) [80,100); min and max of each.
    steps = [0, 19, 20, 37, 40, 59, 62, 79, 80, 99]
    assert series.xs == tuple(offset + scale * s for s in steps)
    assert 100.0 in series.ys and -50.0 in series.ys
    assert series.ys[0] == 0.0 and series.ys[-1] == pytest.approx(0.99)
    assert (series.total_points, series.downsampled, series.x) == (100, True, axis)
    assert len(series) <= 12


def test_series_zoomed_range_by_hand(store: Store, run_id: int) -> None:
    _sawtooth_with_spikes(store, run_id)
    series = store.series(run_id, "r", max_points=12, x_min=30, x_max=69)
    assert series.xs == (30, 37, 38, 45, 46, 53, 54, 61, 62, 69)
    assert series.total_points == 40 and series.downsampled


def test_small_series_come_back_whole(store: Store, run_id: int) -> None:
    _sawtooth_with_spikes(store, run_id)
    series = store.series(run_id, "r")
    assert series.xs == tuple(range(100)) and not series.downsampled
    assert store.series(run_id, "missing") == type(series)(run_id, "missing", "step", (), (), 0, False)
    with pytest.raises(ValueError, match="unknown x-axis 'time'"):
        store.series(run_id, "r", x="time")


def _reference(points: list[tuple[int, float]], n: int) -> set[tuple[float, float]]:
    lo, hi = min(p[0] for p in points), max(p[0] for p in points)
    buckets: dict[int, list[tuple[int, float]]] = {}
    for x, v in points:
        buckets.setdefault(bucket_of(x, lo, hi, n), []).append((x, v))
    kept = {points[0], points[-1]}
    for group in buckets.values():
        kept.add(min(group, key=lambda p: p[1]))
        kept.add(max(group, key=lambda p: p[1]))
    return {(float(x), v) for x, v in kept}


def test_series_matches_a_python_reference_on_random_data(store: Store, run_id: int) -> None:
    rng = random.Random(7)
    points = [(s, rng.random()) for s in range(0, 6000, 3)]  # 2000 points, gaps between steps
    store.log_metrics(run_id, 0, 0, {"other": 1.0})  # another key of the same run stays out
    store.import_metrics(run_id, (MetricPoint("k", s, s, v, float(s)) for s, v in points))
    series = store.series(run_id, "k", max_points=100)
    assert set(zip(series.xs, series.ys, strict=True)) == _reference(points, bucket_count(100))
    assert len(series) <= 100 and series.total_points == 2000


def test_float_bounds_on_integer_axes_are_rounded_inwards(store: Store, run_id: int) -> None:
    _sawtooth_with_spikes(store, run_id)
    series = store.series(run_id, "r", x_min=29.5, x_max=69.9)  # plot zooms send floats
    assert (series.xs[0], series.xs[-1], series.total_points) == (30, 69, 40)
