"""Plotly figures for metric curves: smoothed line over the faint raw line, downsampled by the store; a
constant curve is drawn flat on a y axis around its value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

import plotly.graph_objects as go
import plotly.io as pio

from app.escape import plotly_text
from app.seedgroups import Band
from app.smoothing import smooth
from db.records import Series

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6")
GL_THRESHOLD = 5_000
X_TITLES = {"step": "step", "env_step": "env step", "wall_time": "wall time"}


def _xs(series: Series) -> list:
    if series.x == "wall_time":
        return [datetime.fromtimestamp(x, tz=UTC) for x in series.xs]
    return list(series.xs)


SPARSE_POINTS = 12


def _mode(points: int) -> str:
    """Lines, with a marker on every point when there are few (a single point has no line to draw)."""
    return "lines+markers" if points <= SPARSE_POINTS else "lines"


def _x_value(x_name: str, x: float):
    return datetime.fromtimestamp(x, tz=UTC) if x_name == "wall_time" else x


def _layout(figure: go.Figure, curves_x: str, title: str, subtitle: str, height: int) -> None:
    figure.update_layout(
        title={"text": plotly_text(f"{title}{subtitle}"), "font": {"size": 13}},
        height=height,
        margin={"l": 40, "r": 10, "t": 40, "b": 30},
        xaxis_title=X_TITLES.get(curves_x, curves_x),
        legend={"orientation": "h", "y": -0.2},
        uirevision=plotly_text(title),  # keep the user's zoom across live refreshes
    )


FLAT_PAD = 0.05


def flat_range(ys: Sequence[float]) -> list[float] | None:
    """A y range for values that are all the same (an epoch counter, a converged metric): the value ±
    5 % (± 0.05 around 0), so the line is drawn flat in the middle with labelled ticks; None when the
    values vary (Plotly's own range) or there are none."""
    finite = [y for y in ys if isinstance(y, int | float) and math.isfinite(y)]
    if not finite or max(finite) != min(finite):
        return None
    value = finite[0]
    pad = abs(value) * FLAT_PAD or FLAT_PAD
    return [round(value - pad, 12), round(value + pad, 12)]


def mark_attempts(figure: go.Figure, boundaries: Sequence[tuple[float, str]], x_name: str) -> None:
    """A dotted vertical line with a label where each later attempt of a resumed run begins."""
    for x, label in boundaries:
        at = _x_value(x_name, x)
        figure.add_shape(type="line", x0=at, x1=at, y0=0, y1=1, yref="paper",
                         line={"color": "#888888", "width": 1, "dash": "dot"})
        figure.add_annotation(x=at, y=1, yref="paper", text=plotly_text(label), showarrow=False, xanchor="left",
                              yanchor="top", font={"size": 10, "color": "#666666"})


def line_figure(
    curves: Sequence[tuple[str, Series]],
    *,
    title: str = "",
    smoothing: str = "ema",
    amount: float = 0.6,
    height: int = 300,
    boundaries: Sequence[tuple[float, str]] = (),
) -> go.Figure:
    """:func:`line_spec` as a Plotly figure (wrapped without Plotly's per-value validation)."""
    return go.Figure(line_spec(curves, title=title, smoothing=smoothing, amount=amount, height=height,
                               boundaries=boundaries), _validate=False)


def line_spec(
    curves: Sequence[tuple[str, Series]],
    *,
    title: str = "",
    smoothing: str = "ema",
    amount: float = 0.6,
    height: int = 300,
    boundaries: Sequence[tuple[float, str]] = (),
) -> dict:
    """One figure with, per curve, the raw points (faint, always kept) and the smoothed line.

    With smoothing ``none`` only the raw line is drawn, at full opacity. Curves with few points get a
    marker on each point (a one-point curve shows its point). Above a few thousand points WebGL
    traces are used so the browser stays responsive. ``boundaries`` marks where the attempts of a
    resumed run begin (x, label).

    The figure is written as Plotly's own dict (what :func:`line_figure` wraps without Plotly's
    per-value validation, and :class:`SpecFigure` hands to ``st.plotly_chart`` as it is): every key
    here is a valid one, and validating each point cost most of a live chart's redraw (about 3x the
    time of the rest).
    """
    data: list[dict] = []
    for index, (name, series) in enumerate(curves):
        label = plotly_text(name)  # agent and experiment names: Plotly reads tags in its text
        color = PALETTE[index % len(PALETTE)]
        xs = _xs(series)
        ys = list(series.ys)
        kind = "scattergl" if len(xs) > GL_THRESHOLD else "scatter"
        smoothed = smoothing != "none" and amount > 0 and len(xs) > 1
        raw_name = f"{label} (raw)" if smoothed else label
        data.append({"type": kind, "x": xs, "y": ys, "mode": _mode(len(xs)) if not smoothed else "lines",
                     "name": raw_name, "legendgroup": label, "line": {"color": color, "width": 1},
                     "marker": {"size": 6}, "opacity": 0.3 if smoothed else 1.0, "showlegend": not smoothed})
        if smoothed:
            data.append({"type": kind, "x": xs, "y": smooth(ys, smoothing, amount), "mode": _mode(len(xs)),
                         "name": label, "legendgroup": label, "line": {"color": color, "width": 2},
                         "marker": {"size": 5}})
    x_name = curves[0][1].x if curves else "step"
    sampled = [f"{s.total_points:,}→{len(s):,}" for _, s in curves if s.downsampled]
    subtitle = f" · downsampled {', '.join(sampled)} (min/max kept)" if sampled else ""
    layout: dict = {
        "title": {"text": plotly_text(f"{title}{subtitle}"), "font": {"size": 13}},
        "height": height,
        "margin": {"l": 40, "r": 10, "t": 40, "b": 30},
        "xaxis": {"title": {"text": X_TITLES.get(x_name, x_name)}},
        "legend": {"orientation": "h", "y": -0.2},
        "uirevision": plotly_text(title),  # keep the user's zoom across live refreshes
    }
    if (flat := flat_range([y for _, series in curves for y in series.ys])) is not None:
        layout["yaxis"] = {"range": flat}
    if boundaries:
        layout["shapes"] = [{"type": "line", "x0": at, "x1": at, "y0": 0, "y1": 1, "yref": "paper",
                             "line": {"color": "#888888", "width": 1, "dash": "dot"}}
                            for at in (_x_value(x_name, x) for x, _ in boundaries)]
        layout["annotations"] = [{"x": _x_value(x_name, x), "y": 1, "yref": "paper", "text": plotly_text(label),
                                  "showarrow": False, "xanchor": "left", "yanchor": "top",
                                  "font": {"size": 10, "color": "#666666"}} for x, label in boundaries]
    return {"data": data, "layout": layout}


def _default_template() -> dict:
    """The layout template a new ``go.Figure`` gets (Streamlit's, once Streamlit is imported), as a dict."""
    name = pio.templates.default
    if name not in _TEMPLATES:
        _TEMPLATES[name] = pio.templates[name].to_plotly_json() if name else {}
    return _TEMPLATES[name]


_TEMPLATES: dict[str, dict] = {}


class SpecFigure(go.Figure):
    """A figure spec (Plotly's own dict, as :func:`line_spec` writes it) that ``st.plotly_chart`` takes
    as it is: Streamlit reads a ``go.Figure`` through ``to_dict()``, which deep-copies every point, and
    validates every point of a plain dict; on a live page that was most of a poll's server time. The
    spec is sent with the layout template a ``go.Figure`` would add, so the chart looks the same.

    Only for handing to ``st.plotly_chart``: the figure's own attributes (``.data``, ``update_layout``)
    are not set up (``go.Figure.__init__`` is what costs)."""

    def __init__(self, spec: dict) -> None:  # noqa: D107 - go.Figure.__init__ left out on purpose (see above)
        template = _default_template()
        layout = spec.get("layout") or {}
        if template and "template" not in layout:
            spec = {**spec, "layout": {**layout, "template": template}}
        object.__setattr__(self, "_spec", spec)

    def to_dict(self) -> dict:
        return self._spec

    def to_plotly_json(self) -> dict:
        return self._spec


def _hex_rgba(color: str, alpha: float) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def band_figure(
    groups: Sequence[tuple[str, Band]],
    *,
    title: str = "",
    x_name: str = "step",
    height: int = 300,
) -> go.Figure:
    """One line per group of runs (the mean over its seeds) with a shaded band (min–max or ± one
    standard error, as computed by :func:`app.seedgroups.band`)."""
    figure = go.Figure()
    for index, (name, band) in enumerate(groups):
        label = plotly_text(name)
        color = PALETTE[index % len(PALETTE)]
        xs = [_x_value(x_name, x) for x in band.xs]
        if band.runs > 1:
            figure.add_trace(go.Scatter(x=xs, y=list(band.upper), mode="lines", line={"width": 0},
                                        legendgroup=label, showlegend=False, hoverinfo="skip",
                                        name=f"{label} upper"))
            figure.add_trace(go.Scatter(x=xs, y=list(band.lower), mode="lines", line={"width": 0},
                                        fill="tonexty", fillcolor=_hex_rgba(color, 0.2), legendgroup=label,
                                        showlegend=False, hoverinfo="skip", name=f"{label} lower"))
        figure.add_trace(go.Scatter(x=xs, y=list(band.mean), mode=_mode(len(xs)), name=label, legendgroup=label,
                                    line={"color": color, "width": 2}, marker={"size": 5}))
    _layout(figure, x_name, title, "", height)
    return figure
