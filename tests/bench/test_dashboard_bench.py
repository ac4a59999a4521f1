"""The dashboard benchmark builds what it claims (runs, points, turns) and times every page's queries."""

from __future__ import annotations

from bench.dashboard import build, metric_names, page_queries
from db.store import Store


def test_bench_database_has_the_requested_size(store: Store) -> None:
    big = build(store, runs=4, points=800, turns=200, keys=40)
    assert len(store.list_runs(limit=100)) == 4
    assert len(store.metric_keys(big)) == 40 and metric_names(40)[0] == "train/reward_mean"
    assert store.series(big, "train/reward_mean", max_points=10_000).total_points == 800 // 40
    turns = sum(len(e.turns) for e in store.episodes(big, limit=10_000))
    assert turns == 200
    spike = max(store.series(big, "train/reward_mean", max_points=4).ys)
    assert spike > 20  # the planted spike survives downsampling to 4 points


def test_every_page_has_timed_queries(store: Store) -> None:
    big = build(store, runs=3, points=400, turns=40, keys=20)
    queries = page_queries(store, big)
    assert {"experiments", "runs", "run_detail", "transcripts", "compare", "workers"} <= set(queries)
    for name, query in queries.items():
        assert query() is not None, name
