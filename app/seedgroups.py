"""Runs that differ only by their seed, and their curves as a mean with a band (pure functions).

Learning curves of small models vary a lot with the sampling seed, so a result is judged on the mean
of several seeds. Two runs belong to the same group when their configs are equal once the seed and
the labels that do not change training (name, description, tags) are left out. A group's curve is
the mean over its runs at each x, with a band from the smallest to the largest value (``minmax``) or
one standard error either side of the mean (``sem``).
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LABEL_FIELDS = ("name", "description", "tags")
BANDS = ("minmax", "sem")


def seed_of(config: Mapping[str, Any]) -> int | None:
    """The seed a run config trains with (``trainer.seed``), or None when it names none."""
    seed = (config.get("trainer") or {}).get("seed") if isinstance(config.get("trainer"), Mapping) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def without_seed(config: Mapping[str, Any]) -> str:
    """The config as canonical JSON text with the seed and the labels left out: equal texts mean the
    runs differ only by seed."""
    data = {k: v for k, v in config.items() if k not in LABEL_FIELDS}
    trainer = data.get("trainer")
    if isinstance(trainer, Mapping):
        data["trainer"] = {k: v for k, v in trainer.items() if k != "seed"}
    return json.dumps(data, sort_keys=True, default=str)


@dataclass(frozen=True)
class SeedGroup:
    """Runs whose configs differ only by seed, oldest first, with their seeds."""

    key: str
    run_ids: tuple[int, ...]
    seeds: tuple[int | None, ...]

    @property
    def size(self) -> int:
        return len(self.run_ids)


def group_by_seed(configs: Mapping[int, Mapping[str, Any]]) -> list[SeedGroup]:
    """Groups of run ids (in the order given, groups by their first run) whose configs differ only by seed."""
    groups: dict[str, list[int]] = {}
    for run_id, config in configs.items():
        groups.setdefault(without_seed(config), []).append(run_id)
    return [SeedGroup(key, tuple(ids), tuple(seed_of(configs[i]) for i in ids)) for key, ids in groups.items()]


def same_config_runs(run_id: int, configs: Mapping[int, Mapping[str, Any]]) -> list[int]:
    """The other runs among ``configs`` that differ from ``run_id`` only by seed."""
    key = without_seed(configs[run_id])
    return [i for i, c in configs.items() if i != run_id and without_seed(c) == key]


@dataclass(frozen=True)
class Band:
    """A group's curve: the mean over its runs at each x and a band (lower, upper) around it."""

    xs: tuple[float, ...]
    mean: tuple[float, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    runs: int


def _at(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    """The curve's value at ``x`` (linear between its points), None outside its range."""
    if not xs or x < xs[0] or x > xs[-1]:
        return None
    i = bisect_left(xs, x)
    if xs[i] == x:
        return ys[i]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def band(curves: Sequence[tuple[Sequence[float], Sequence[float]]], kind: str = "minmax") -> Band:
    """Mean and band of several curves ``(xs, ys)`` (xs ascending) on the union of their x values.

    At each x only the curves that reach it count (a run that stopped early leaves the mean to the
    others); values between two points of a curve are interpolated linearly; non-finite values are
    skipped. ``kind`` is ``minmax`` or ``sem`` (mean ± standard error of the mean).
    """
    if kind not in BANDS:
        raise ValueError(f"unknown band {kind!r}; use one of {', '.join(BANDS)}")
    cleaned = []
    for xs, ys in curves:
        pairs = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if math.isfinite(y)]
        if pairs:
            cleaned.append(([p[0] for p in pairs], [p[1] for p in pairs]))
    grid = sorted({x for xs, _ in cleaned for x in xs})
    out_x, mean, lower, upper = [], [], [], []
    for x in grid:
        values = [v for xs, ys in cleaned if (v := _at(xs, ys, x)) is not None]
        if not values:
            continue
        m = sum(values) / len(values)
        if kind == "minmax":
            lo, hi = min(values), max(values)
        elif len(values) > 1:
            sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))
            se = sd / math.sqrt(len(values))
            lo, hi = m - se, m + se
        else:
            lo = hi = m
        out_x.append(x)
        mean.append(m)
        lower.append(lo)
        upper.append(hi)
    return Band(tuple(out_x), tuple(mean), tuple(lower), tuple(upper), runs=len(cleaned))
