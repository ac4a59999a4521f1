"""A study's parameters against its objective (pure functions): the axes of a parallel-coordinates
chart, and each parameter's importance.

Importance here is the **fraction of the objective's variance explained by the parameter** (the
correlation ratio η² of a one-way analysis of variance): the children are put in bins by the
parameter's value, and η² = (sum over bins of n_bin · (bin mean − overall mean)²) / (sum over children of
(value − overall mean)²). A parameter with at most ``max_bins`` distinct values (a grid) gets one bin
per value; a numeric one with more (a random search) is cut into ``max_bins`` bins of about equal
count by rank (equal values always share a bin). η² is 0 when the bins' means are all equal, 1 when
the parameter's bins alone fix the objective. Each child (seed) counts once, so the seeds of a point
are its bin's replicates; with one child per bin η² is 1 whatever the parameter, so read it with the
children's count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_BINS = 4


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def value_text(value: Any) -> str:
    """A parameter value as text (strings as they are, anything else as JSON)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def bins_of(values: Sequence[Any], max_bins: int = MAX_BINS) -> list[int]:
    """The bin of each value: one per distinct value when there are at most ``max_bins`` of them (or
    some value is not a number), else ``max_bins`` bins of about equal count by rank, where a value's
    bin is ``floor(position of its first occurrence in sorted order · max_bins / n)``."""
    texts = [value_text(v) for v in values]
    distinct = list(dict.fromkeys(texts))
    if len(distinct) <= max_bins or not all(is_number(v) for v in values):
        index = {t: i for i, t in enumerate(sorted(distinct))}
        return [index[t] for t in texts]
    ordered = sorted(float(v) for v in values)
    first: dict[float, int] = {}
    for position, v in enumerate(ordered):
        first.setdefault(v, position)
    return [first[float(v)] * max_bins // len(values) for v in values]


def variance_explained(bins: Sequence[int], objective: Sequence[float]) -> float | None:
    """η²: the between-bin sum of squares over the total sum of squares of ``objective``; None when
    the objective does not vary (nothing to explain)."""
    n = len(objective)
    if n == 0:
        return None
    mean = sum(objective) / n
    total = sum((y - mean) ** 2 for y in objective)
    if total <= 1e-12 * max(1.0, mean * mean) * n:
        return None
    groups: dict[int, list[float]] = {}
    for b, y in zip(bins, objective, strict=True):
        groups.setdefault(b, []).append(y)
    between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups.values())
    return min(1.0, between / total)


@dataclass(frozen=True)
class Importance:
    """One parameter's importance: η², the number of bins, and the children it was computed from."""

    param: str
    eta_squared: float | None
    bins: int
    children: int


def param_importance(trials: Sequence[tuple[Mapping[str, Any], float | None]], paths: Sequence[str],
                     max_bins: int = MAX_BINS) -> list[Importance]:
    """η² of each parameter of ``paths`` over the children ``(params, objective)`` with a finite
    objective, largest first (parameters whose η² is unknown last)."""
    kept = [(params, float(y)) for params, y in trials if y is not None and math.isfinite(y)]
    objective = [y for _, y in kept]
    out = []
    for path in paths:
        bins = bins_of([params.get(path) for params, _ in kept], max_bins)
        out.append(Importance(path, variance_explained(bins, objective), len(set(bins)), len(kept)))
    return sorted(out, key=lambda i: (i.eta_squared is None, -(i.eta_squared or 0.0)))


def axis(label: str, values: Sequence[Any]) -> dict[str, Any]:
    """One axis of a ``go.Parcoords``: numbers as they are (as log10 when they are all positive and span
    at least a factor of 100, like learning rates), anything else as categories in sorted order."""
    if values and all(is_number(v) for v in values):
        numbers = [float(v) for v in values]
        if min(numbers) > 0 and max(numbers) / min(numbers) >= 100:
            return {"label": f"log10 {label}", "values": [math.log10(v) for v in numbers]}
        return {"label": label, "values": numbers}
    texts = [value_text(v) for v in values]
    categories = sorted(set(texts))
    code = {t: i for i, t in enumerate(categories)}
    return {"label": label, "values": [code[t] for t in texts], "tickvals": list(range(len(categories))),
            "ticktext": categories}


def parcoords_axes(trials: Sequence[tuple[Mapping[str, Any], float | None]], paths: Sequence[str],
                   objective: str) -> list[dict[str, Any]]:
    """The axes of a parallel-coordinates chart: one per parameter, then the objective; one line per
    child with a finite objective."""
    kept = [(params, float(y)) for params, y in trials if y is not None and math.isfinite(y)]
    axes = [axis(path, [params.get(path) for params, _ in kept]) for path in paths]
    return [*axes, {"label": objective, "values": [y for _, y in kept]}]
