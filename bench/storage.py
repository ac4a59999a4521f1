"""Storage benchmark: ``python -m bench.storage [--points N] [--url URL] [--postgres URL]``.

Measures metric insert throughput through :meth:`Store.log_step` (points per second, one transaction
per step, like a training run logs) and the time of a downsampled series query over a run holding
``--points`` points of one key (1M by default; median of three calls). Runs on a fresh SQLite file in a temporary folder, and
also on PostgreSQL when ``--postgres`` (or ``COOPLAB_TEST_POSTGRES_URL``) names a server that answers;
the PostgreSQL run uses a schema of its own and drops it afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text

from db.engine import resolve_url
from db.records import MetricPoint, Series
from db.store import Store


@dataclass(frozen=True)
class BenchResult:
    """What one database measured."""

    backend: str
    step_points_per_s: float
    bulk_points_per_s: float
    points: int
    series_query_s: float
    series_query_zoom_s: float
    returned_points: int


def _bench(url: str, *, points: int, keys_per_step: int, steps: int) -> BenchResult:
    store = Store(url, migrate=True)
    try:
        exp = store.create_experiment(f"bench-{uuid.uuid4().hex[:8]}")
        # 1) throughput the way a trainer writes: one log_step (one transaction) per step.
        run = store.create_run(exp.id, {}, "cpu")
        metrics = {f"bench/key_{i}": 0.0 for i in range(keys_per_step)}
        start = time.perf_counter()
        for step in range(steps):
            store.log_step(run.id, step, step * 4, {k: float(step) for k in metrics}, wall_time=float(step))
        step_rate = steps * keys_per_step / (time.perf_counter() - start)

        # 2) one key with `points` points, inserted in large batches (also measured).
        #    import_metrics writes the rollups with the points, as every write path does.
        big = store.create_run(exp.id, {}, "cpu")
        start = time.perf_counter()
        store.import_metrics(big.id, (
            MetricPoint("train/reward_mean", s, 4 * s,
                        float((s * 7919) % 1000) / 1000.0 + (50.0 if s == points // 3 else 0.0), 1.0e9 + s * 0.01)
            for s in range(points)))
        bulk_rate = points / (time.perf_counter() - start)
        if store.dialect == "postgresql":
            # Freshly bulk-loaded rows: let the planner and index-only scans know them, as autovacuum would.
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM ANALYZE metrics"))
                conn.execute(text("VACUUM ANALYZE metric_rollups"))

        def timed(**kwargs: float) -> tuple[float, Series]:
            # Median of three: the first call also pays for connecting and warming caches.
            times, result = [], None
            for _ in range(3):
                start = time.perf_counter()
                result = store.series(big.id, "train/reward_mean", max_points=1000, **kwargs)
                times.append(time.perf_counter() - start)
            assert result is not None
            return statistics.median(times), result

        full_s, series = timed()
        assert max(series.ys) >= 50.0, "the spike was lost by downsampling"
        zoom_s, _ = timed(x_min=points * 0.4, x_max=points * 0.5)
        return BenchResult(backend=store.dialect, step_points_per_s=step_rate, bulk_points_per_s=bulk_rate,
                           points=points, series_query_s=full_s, series_query_zoom_s=zoom_s,
                           returned_points=len(series))
    finally:
        store.close()


def _postgres_schema_url(url: str, schema: str) -> str:
    return resolve_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)


def bench_postgres(url: str, **kwargs: int) -> BenchResult | None:
    """Run the benchmark in a throwaway schema; None when the server does not answer."""
    admin = create_engine(resolve_url(url), isolation_level="AUTOCOMMIT")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except Exception as err:  # noqa: BLE001 - any connection failure means "no server"
        print(f"PostgreSQL at {url} did not answer ({type(err).__name__}); skipped")
        admin.dispose()
        return None
    try:
        return _bench(_postgres_schema_url(url, schema), **kwargs)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def _report(result: BenchResult) -> None:
    print(f"[{result.backend}] log_step inserts: {result.step_points_per_s:,.0f} points/s; "
          f"bulk inserts: {result.bulk_points_per_s:,.0f} points/s")
    print(f"[{result.backend}] series over {result.points:,} points -> {result.returned_points} points: "
          f"{result.series_query_s * 1000:.0f} ms (zoomed to 10%: {result.series_query_zoom_s * 1000:.0f} ms)")


def main(argv: list[str] | None = None) -> list[BenchResult]:
    parser = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="points in the series query run")
    parser.add_argument("--steps", type=int, default=200, help="log_step calls for the throughput run")
    parser.add_argument("--keys", type=int, default=50, help="metric keys per step")
    parser.add_argument("--url", help="bench this SQLite/SQLAlchemy URL instead of a temporary SQLite file")
    parser.add_argument("--postgres", default=os.environ.get("COOPLAB_TEST_POSTGRES_URL"),
                        help="PostgreSQL URL to bench as well (default: $COOPLAB_TEST_POSTGRES_URL)")
    args = parser.parse_args(argv)
    kwargs = {"points": args.points, "keys_per_step": args.keys, "steps": args.steps}
    results = []
    if args.url:
        results.append(_bench(args.url, **kwargs))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            results.append(_bench(f"sqlite:///{Path(tmp) / 'bench.db'}", **kwargs))
    _report(results[-1])
    if args.postgres:
        pg = bench_postgres(args.postgres, **kwargs)
        if pg is not None:
            results.append(pg)
            _report(pg)
    return results


if __name__ == "__main__":
    main()
