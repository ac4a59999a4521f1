"""Series along each x axis: ``python -m bench.series_axes [--rows N] [--keys K] [--postgres URL]``.

A run logs ``--keys`` metrics per step (20 by default) until it holds ``--rows`` metric rows (1M),
every key of a step sharing that step's wall time, as ``log_step`` writes them. The benchmark then
times what a run page asks for when it draws every key: one downsampled series (1000 points) per key,
along ``step``, ``wall_time`` and ``env_step``, the median of three rounds. Runs on a fresh SQLite
file in a temporary folder, and also on PostgreSQL when ``--postgres`` (or
``COOPLAB_TEST_POSTGRES_URL``) names a server that answers, in a schema of its own that it drops.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text

from db.engine import resolve_url
from db.records import MetricPoint
from db.store import Store

AXES = ("step", "wall_time", "env_step")


@dataclass(frozen=True)
class AxisTiming:
    """Seconds for one series per key along one axis (median of the rounds)."""

    backend: str
    axis: str
    keys: int
    rows: int
    seconds: float
    points_per_series: int


def _points(keys: int, steps: int) -> Iterator[MetricPoint]:
    for step in range(steps):
        wall = 1.7e9 + step * 0.37
        for k in range(keys):
            yield MetricPoint(f"train/key_{k:02d}", step, 4 * step, ((step * 7919 + k * 31) % 1000) / 1000.0, wall)


def bench_url(url: str, *, rows: int, keys: int, rounds: int = 3) -> list[AxisTiming]:
    """Fill a run at ``url`` and time the series of every key along each axis."""
    store = Store(url, migrate=True)
    try:
        run = store.create_run(store.create_experiment(f"axes-{uuid.uuid4().hex[:8]}").id, {}, "cpu")
        store.import_metrics(run.id, _points(keys, rows // keys))
        if store.dialect == "postgresql":
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM ANALYZE metrics"))
                conn.execute(text("VACUUM ANALYZE metric_rollups"))
        names = store.metric_keys(run.id)
        out = []
        for axis in AXES:
            times, kept = [], 0
            for _ in range(rounds):
                start = time.perf_counter()
                series = [store.series(run.id, name, x=axis, max_points=1000) for name in names]
                times.append(time.perf_counter() - start)
                kept = len(series[0])
            out.append(AxisTiming(store.dialect, axis, len(names), rows, statistics.median(times), kept))
        return out
    finally:
        store.close()


def bench_postgres(url: str, **kwargs: int) -> list[AxisTiming]:
    """Run the benchmark in a throwaway schema; empty when the server does not answer."""
    admin = create_engine(resolve_url(url), isolation_level="AUTOCOMMIT")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except Exception as err:  # noqa: BLE001 - any connection failure means "no server"
        print(f"PostgreSQL at {url} did not answer ({type(err).__name__}); skipped")
        admin.dispose()
        return []
    schema_url = resolve_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)
    try:
        return bench_url(schema_url, **kwargs)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def report(timings: list[AxisTiming]) -> None:
    for t in timings:
        print(f"[{t.backend}] {t.axis:>9} axis: {t.seconds:6.2f} s for {t.keys} keys at {t.rows:,} rows "
              f"({t.seconds / t.keys * 1000:.0f} ms per series of {t.points_per_series} points)")


def main(argv: list[str] | None = None) -> list[AxisTiming]:
    parser = argparse.ArgumentParser(prog="python -m bench.series_axes", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="metric rows in the run")
    parser.add_argument("--keys", type=int, default=20, help="metric keys per step")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per axis (the median is printed)")
    parser.add_argument("--url", help="bench this SQLAlchemy URL instead of a temporary SQLite file")
    parser.add_argument("--postgres", default=os.environ.get("COOPLAB_TEST_POSTGRES_URL"),
                        help="PostgreSQL URL to bench as well (default: $COOPLAB_TEST_POSTGRES_URL)")
    args = parser.parse_args(argv)
    kwargs = {"rows": args.rows, "keys": args.keys, "rounds": args.rounds}
    if args.url:
        timings = bench_url(args.url, **kwargs)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            timings = bench_url(f"sqlite:///{Path(tmp) / 'axes.db'}", **kwargs)
    report(timings)
    if args.postgres:
        pg = bench_postgres(args.postgres, **kwargs)
        report(pg)
        timings += pg
    return timings


if __name__ == "__main__":
    main()
