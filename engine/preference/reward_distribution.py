"""Team-reward distributions of the iterative preference trainers (CoMLRL 1.4.3's
``log_reward_distribution``), pure functions, torch-free and stdlib only.

Per iteration a trainer gathers four series of team rewards (:data:`SERIES`): the current
policy's candidates, the comparator's candidates, and the winners and losers of the pairs it
selected. From them this module makes:

- metrics ``reward_dist/<series>/<stat>`` (:func:`distribution_metrics`);
- a JSON-able record with the shared bin edges and each series' summary and counts
  (:func:`distribution_record`);
- a self-contained SVG of the overlaid histograms (:func:`render_svg`);
- both files, ``iteration_NNN.json`` and ``iteration_NNN.svg``, written atomically
  (:func:`write_distribution`).

Non-finite rewards (NaN, +-inf) are left out everywhere. The bins span the observed rewards of
all series together (:func:`distribution_range`), so the four histograms of an iteration share
their edges; values outside the edges count in the end bins, and the last bin is closed.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import statistics
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

SERIES = ("current", "comparator", "winner", "loser")

STATS = ("mean", "std", "min", "max", "median", "count")

_COLORS = {"current": "#e87030", "comparator": "#6e6e6e", "winner": "#2a9d4b", "loser": "#2878d6"}

# the SVG's geometry (user units)
_WIDTH, _HEIGHT = 480, 280
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 32, 46


def _finite(values: Sequence[float]) -> list[float]:
    """The finite values, as floats, in their order."""
    return [float(v) for v in values if math.isfinite(float(v))]


def _ordered(series: Mapping[str, Sequence[float]]) -> Iterator[tuple[str, Sequence[float]]]:
    """The series in :data:`SERIES` order; an unknown name is an error (a wiring typo)."""
    unknown = sorted(set(series) - set(SERIES))
    if unknown:
        raise ValueError(f"reward distribution: unknown series {', '.join(unknown)}; "
                         f"expected some of {', '.join(SERIES)}")
    return ((name, series[name]) for name in SERIES if name in series)


def bin_edges(low: float, high: float, bins: int) -> list[float]:
    """``bins + 1`` evenly spaced edges from ``low`` to ``high``; ``low == high`` spans ``low +- 0.5``."""
    if bins < 1:
        raise ValueError(f"reward distribution: bins must be at least 1, got {bins}")
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"reward distribution: bad range ({low}, {high})")
    if low == high:
        low, high = low - 0.5, high + 0.5
    width = high - low
    return [low + width * i / bins for i in range(bins)] + [float(high)]


def histogram(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    """Counts per bin ``[edges[i], edges[i+1])``, the last bin closed; non-finite values skipped and
    values outside the edges counted in the end bins."""
    if len(edges) < 2 or any(a >= b for a, b in zip(edges, edges[1:], strict=False)):
        raise ValueError("reward distribution: edges must be at least two, strictly increasing")
    last = len(edges) - 2
    counts = [0] * (last + 1)
    for value in _finite(values):
        index = bisect.bisect_right(edges, value) - 1
        counts[min(max(index, 0), last)] += 1
    return counts


def distribution_range(series: Mapping[str, Sequence[float]]) -> tuple[float, float]:
    """The smallest and largest finite value over every series; ``(0.0, 1.0)`` when there is none."""
    finite = [v for values in series.values() for v in _finite(values)]
    return (min(finite), max(finite)) if finite else (0.0, 1.0)


def summary(values: Sequence[float]) -> dict[str, float]:
    """count, mean, std (population), min, max and median of the finite values; only count when none."""
    finite = _finite(values)
    if not finite:
        return {"count": 0.0}
    return {"count": float(len(finite)), "mean": statistics.fmean(finite), "std": statistics.pstdev(finite),
            "min": min(finite), "max": max(finite), "median": float(statistics.median(finite))}


def distribution_metrics(series: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """``reward_dist/<series>/<stat>`` for each series with a finite value (stats: :data:`STATS`)."""
    metrics: dict[str, float] = {}
    for name, values in _ordered(series):
        stats = summary(values)
        if stats["count"]:
            metrics.update({f"reward_dist/{name}/{stat}": stats[stat] for stat in STATS})
    return metrics


def distribution_record(iteration: int, series: Mapping[str, Sequence[float]], bins: int = 20) -> dict[str, Any]:
    """A JSON-able record of one iteration: ``iteration`` (as given, 1-based), the shared ``edges``, and
    under ``series`` each given series' summary (``count`` an int), ``counts`` per bin and finite ``values``."""
    edges = bin_edges(*distribution_range(series), bins)
    record_series: dict[str, dict[str, Any]] = {}
    for name, values in _ordered(series):
        stats: dict[str, Any] = summary(values)
        stats["count"] = int(stats["count"])
        record_series[name] = {**stats, "counts": histogram(values, edges), "values": _finite(values)}
    return {"iteration": int(iteration), "bins": bins, "edges": edges, "series": record_series}


def _tick_label(value: float) -> str:
    """A compact axis label: integers without a point, others to three significant digits."""
    if abs(value - round(value)) < 1e-9 and abs(value) < 1e6:
        return str(int(round(value)))
    return f"{value:.3g}"


def _attr(value: object) -> str:
    """``value`` escaped for an XML attribute (double-quoted)."""
    return escape(str(value), {'"': "&quot;"})


def _count_ticks(max_count: int) -> list[int]:
    """At most five integer ticks from 0, the last at or above ``max_count`` (at least 1)."""
    top = max(int(max_count), 1)
    step = math.ceil(top / 4)
    return list(range(0, step * math.ceil(top / step) + 1, step))


def render_svg(record: Mapping[str, Any], title: str) -> str:
    """A self-contained SVG of a :func:`distribution_record`: one filled step outline (``<path>``) per
    series with a count, overlaid on shared axes, with a legend, ticks and labels; all text escaped."""
    edges = [float(e) for e in record["edges"]]
    shown = [(name, data) for name, data in record["series"].items() if int(data.get("count", 0)) > 0]
    y_ticks = _count_ticks(max((max(data["counts"]) for _, data in shown), default=1))
    plot_right, plot_bottom = _WIDTH - _RIGHT, _HEIGHT - _BOTTOM
    x_span = edges[-1] - edges[0]

    def x_of(value: float) -> float:
        return _LEFT + (value - edges[0]) / x_span * (plot_right - _LEFT)

    def y_of(count: float) -> float:
        return plot_bottom - count / y_ticks[-1] * (plot_bottom - _TOP)

    font = 'font-family="Arial, sans-serif" font-size="11"'
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
             f'viewBox="0 0 {_WIDTH} {_HEIGHT}">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{_LEFT}" y="18" {font} font-weight="bold">{escape(str(title))}</text>',
             '<g class="grid" stroke="#e0e0e0" stroke-width="1">']
    x_ticks = [edges[0] + x_span * i / 4 for i in range(5)]
    parts += [f'<line x1="{x_of(t):.1f}" y1="{_TOP}" x2="{x_of(t):.1f}" y2="{plot_bottom}"/>' for t in x_ticks]
    parts += [f'<line x1="{_LEFT}" y1="{y_of(t):.1f}" x2="{plot_right}" y2="{y_of(t):.1f}"/>' for t in y_ticks]
    parts.append("</g>")
    for name, data in shown:
        color = _attr(_COLORS.get(name, "#333333"))
        points = [f"M{x_of(edges[0]):.1f},{plot_bottom:.1f}"]
        for i, count in enumerate(data["counts"]):
            points.append(f"L{x_of(edges[i]):.1f},{y_of(count):.1f} L{x_of(edges[i + 1]):.1f},{y_of(count):.1f}")
        points.append(f"L{x_of(edges[-1]):.1f},{plot_bottom:.1f} Z")
        parts.append(f'<path class="series" data-series="{_attr(name)}" d="{" ".join(points)}" fill="{color}" '
                     f'fill-opacity="0.2" stroke="{color}" stroke-width="1.5"/>')
    parts += [f'<line x1="{_LEFT}" y1="{plot_bottom}" x2="{plot_right}" y2="{plot_bottom}" stroke="#505050"/>',
              f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{plot_bottom}" stroke="#505050"/>',
              f'<g class="ticks" {font} fill="#4d4d4d">']
    parts += [f'<text x="{x_of(t):.1f}" y="{plot_bottom + 14}" text-anchor="middle">{escape(_tick_label(t))}</text>'
              for t in x_ticks]
    parts += [f'<text x="{_LEFT - 6}" y="{y_of(t) + 4:.1f}" text-anchor="end">{escape(_tick_label(t))}</text>'
              for t in y_ticks]
    middle_x, middle_y = (_LEFT + plot_right) / 2, (_TOP + plot_bottom) / 2
    parts += ["</g>",
              f'<text x="{middle_x:.1f}" y="{_HEIGHT - 10}" {font} text-anchor="middle">team reward</text>',
              f'<text x="14" y="{middle_y:.1f}" {font} text-anchor="middle" '
              f'transform="rotate(-90 14 {middle_y:.1f})">candidates</text>',
              f'<g class="legend" {font}>']
    for row, (name, data) in enumerate(shown):
        y = _TOP + 6 + 16 * row
        color, label = _attr(_COLORS.get(name, "#333333")), escape(f"{name} (n={int(data['count'])})")
        parts += [f'<rect x="{plot_right - 120}" y="{y}" width="12" height="10" fill="{color}" fill-opacity="0.6"/>',
                  f'<text x="{plot_right - 103}" y="{y + 9}">{label}</text>']
    if not shown:
        parts.append(f'<text x="{middle_x:.1f}" y="{middle_y:.1f}" text-anchor="middle">no finite rewards</text>')
    parts += ["</g>", "</svg>"]
    return "\n".join(parts) + "\n"


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temp file beside ``path``, then move it over ``path`` (no partial file)."""
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_distribution(folder: str | Path, iteration: int, series: Mapping[str, Sequence[float]],
                       bins: int = 20) -> tuple[Path, Path]:
    """Write ``folder/iteration_NNN.json`` (the record) and ``.svg`` (its plot), creating ``folder``;
    returns the two paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record = distribution_record(iteration, series, bins)
    json_path, svg_path = folder / f"iteration_{iteration:03d}.json", folder / f"iteration_{iteration:03d}.svg"
    _write_atomically(json_path, json.dumps(record, indent=2) + "\n")
    _write_atomically(svg_path, render_svg(record, f"Team reward distribution, iteration {iteration}"))
    return json_path, svg_path
