"""Plotly figures for metric curves: smoothed line over the faint raw line, downsampled by the store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import plotly.graph_objects as go

from app.smoothing import smooth
from db.records import Series

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6")
GL_THRESHOLD = 5_000
X_TITLES = {"step": "step", "env_step": "env step", "wall_time": "wall time"}


def _xs(series: Series) -> list:
    if series.x == "wall_time":
        return [datetime.fromtimestamp(x, tz=UTC) for x in series.xs]
    return list(series.xs)


def line_figure(
    curves: Sequence[tuple[str, Series]],
    *,
    title: str = "",
    smoothing: str = "ema",
    amount: float = 0.6,
    height: int = 300,
) -> go.Figure:
    """One figure with, per curve, the raw points (faint, always kept) and the smoothed line.

    With smoothing ``none`` only the raw line is drawn, at full opacity. Above a few thousand points
    WebGL traces are used so the browser stays responsive.
    """
    figure = go.Figure()
    for index, (label, series) in enumerate(curves):
        color = PALETTE[index % len(PALETTE)]
        xs = _xs(series)
        ys = list(series.ys)
        trace = go.Scattergl if len(xs) > GL_THRESHOLD else go.Scatter
        smoothed = smoothing != "none" and amount > 0
        raw_name = f"{label} (raw)" if smoothed else label
        figure.add_trace(trace(x=xs, y=ys, mode="lines", name=raw_name, legendgroup=label,
                               line={"color": color, "width": 1}, opacity=0.3 if smoothed else 1.0,
                               showlegend=not smoothed))
        if smoothed:
            figure.add_trace(trace(x=xs, y=smooth(ys, smoothing, amount), mode="lines", name=label,
                                   legendgroup=label, line={"color": color, "width": 2}))
    x_name = curves[0][1].x if curves else "step"
    sampled = [f"{s.total_points:,}→{len(s):,}" for _, s in curves if s.downsampled]
    subtitle = f" · downsampled {', '.join(sampled)} (min/max kept)" if sampled else ""
    figure.update_layout(
        title={"text": f"{title}{subtitle}", "font": {"size": 13}},
        height=height,
        margin={"l": 40, "r": 10, "t": 40, "b": 30},
        xaxis_title=X_TITLES.get(x_name, x_name),
        legend={"orientation": "h", "y": -0.2},
        uirevision=title,  # keep the user's zoom across live refreshes
    )
    return figure
