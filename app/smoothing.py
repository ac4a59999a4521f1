"""Curve smoothing for the charts: pure functions over plain lists of floats.

The charts always draw the raw line as well (faint), so smoothing never hides what was logged.
Non-finite values (NaN, inf) are passed through unchanged and do not disturb the running average.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def ema(values: Sequence[float], weight: float) -> list[float]:
    """Debiased exponential moving average, the same formula as TensorBoard's smoothing slider.

    ``weight`` in [0, 1): 0 returns the values unchanged, larger means smoother. The running
    average starts at zero and is divided by ``1 - weight**n`` (``n`` finite points seen so far), so
    the first points are not pulled towards zero.
    """
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}; use 0 for no smoothing")
    out: list[float] = []
    running = 0.0
    seen = 0
    for value in values:
        if not math.isfinite(value):
            out.append(value)
            continue
        running = running * weight + (1.0 - weight) * value
        seen += 1
        debias = 1.0 - weight**seen if weight > 0 else 1.0
        out.append(running / debias)
    return out


def rolling_mean(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over the last ``window`` finite points (fewer at the start)."""
    if window < 1:
        raise ValueError(f"rolling window must be at least 1, got {window}")
    out: list[float] = []
    recent: list[float] = []
    total = 0.0
    for value in values:
        if not math.isfinite(value):
            out.append(value)
            continue
        recent.append(value)
        total += value
        if len(recent) > window:
            total -= recent.pop(0)
        out.append(total / len(recent))
    return out


def within_range(smoothed: Sequence[float], values: Sequence[float]) -> list[float]:
    """``smoothed`` clipped to the range of the finite ``values``: an average never leaves it, so this
    only removes floating-point rounding (a constant 1.0 stays exactly 1.0, never 1.0000000000000002,
    which the chart would blow up into spikes)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return list(smoothed)
    lo, hi = min(finite), max(finite)
    return [min(hi, max(lo, s)) if math.isfinite(s) else s for s in smoothed]


def smooth(values: Sequence[float], method: str, amount: float) -> list[float]:
    """Dispatch on the chart's smoothing control: ``none``, ``ema`` (weight) or ``window`` (points)."""
    if method == "none":
        return list(values)
    if method == "ema":
        return within_range(ema(values, amount), values)
    if method == "window":
        return within_range(rolling_mean(values, max(1, int(amount))), values)
    raise ValueError(f"unknown smoothing method {method!r}; use 'none', 'ema' or 'window'")
