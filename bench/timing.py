"""The clock the dashboard and sandbox benchmarks share: the median wall time of repeated calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(action: Callable[[], object], rounds: int, *, warm_up: bool = False) -> float:
    """Median wall-clock seconds of ``rounds`` calls of ``action``; with ``warm_up`` one untimed call
    runs first (discovery, page cache, lazy imports)."""
    if warm_up:
        action()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
