"""Pure rules of studies: the median stopping rule and per-point statistics over seeds.

Nothing here touches the database or the broker; :mod:`jobs.studies` feeds these functions the
stored metric points and acts on their answers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Points = Sequence[tuple[int, float]]
"""A metric curve: ``(step, value)`` pairs by ascending step."""


def mean_up_to(points: Points, step: int) -> float | None:
    """The mean of the values at steps ``<= step`` (None when there are none)."""
    values = [v for s, v in points if s <= step]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class MedianVerdict:
    """Whether to stop a child, at which step, and why (``reason`` is stored with the child)."""

    stop: bool
    step: int
    reason: str = ""


def median_rule(candidate: Points, others: Sequence[Points], *, metric: str, min_steps: int,
                min_trials: int) -> MedianVerdict:
    """The median stopping rule (Golovin et al., Google Vizier): at the candidate's last step ``s``
    (at least ``min_steps``), stop it when the mean of its metric up to ``s`` is strictly below the
    median of the same mean of the ``others`` (the completed children) that reached ``s`` (at least
    ``min_trials`` of them). Larger values are better."""
    if not candidate:
        return MedianVerdict(False, 0)
    step = candidate[-1][0]
    if step < min_steps:
        return MedianVerdict(False, step)
    reached = [mean_up_to(o, step) for o in others if o and o[-1][0] >= step]
    peers = [m for m in reached if m is not None]
    if len(peers) < min_trials:
        return MedianVerdict(False, step)
    own = mean_up_to(candidate, step)
    median = statistics.median(peers)
    if own is None or own >= median:
        return MedianVerdict(False, step)
    return MedianVerdict(True, step, f"median rule at step {step}: mean {metric} so far {own:.4g} is below the "
                                     f"median {median:.4g} of {len(peers)} completed runs at that step")


@dataclass(frozen=True)
class Spread:
    """Mean and sample standard deviation (n - 1; 0 for one value) of a point's values over its seeds."""

    mean: float | None
    std: float | None
    n: int


def spread(values: Sequence[float | None]) -> Spread:
    """The :class:`Spread` of the finite values (missing and NaN values are left out)."""
    kept = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return Spread(None, None, 0)
    return Spread(statistics.fmean(kept), statistics.stdev(kept) if len(kept) > 1 else 0.0, len(kept))
