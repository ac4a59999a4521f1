"""The statistics of an evaluation over items: means with their standard errors, and pass@k.

Pure functions over plain numbers. An evaluation's items are its independent draws, so a metric's
standard error is the sample standard deviation of its per-item values over the square root of
their count (``0.0`` for a single item, where no spread can be estimated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.trainer.advantages import pass_at_k


def mean_and_se(values: Sequence[float]) -> tuple[float, float]:
    """The mean of ``values`` and its standard error ``s / sqrt(n)`` (``s``: the n-1 standard deviation)."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_and_se needs at least one value")
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def pass_at_ks(n: int, c: int) -> dict[int, float]:
    """Unbiased pass@k for every k from 1 to ``n``, for one item with ``c`` of ``n`` samples correct."""
    return {k: pass_at_k(n, c, k) for k in range(1, n + 1)}


def summarize(per_item: Sequence[dict[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Means and standard errors of every key over the items that report it (``(means, ses)``)."""
    keys: dict[str, list[float]] = {}
    for row in per_item:
        for key, value in row.items():
            keys.setdefault(key, []).append(float(value))
    means, ses = {}, {}
    for key, values in keys.items():
        means[key], ses[key] = mean_and_se(values)
    return means, ses
