"""The run page's "Who contributed" chart: each agent's credit over the steps (``agent/<name>/credit``,
the mean over a step's measured joint actions of the team reward less the team reward with that
agent's reply left empty) and a bar of each agent's mean credit over the run's last fifth of steps.

A run that logged no credit gets a short note instead: that its credit probes were off (the default:
they call the reward again) and how to turn them on (``credit_samples``), that a one-agent run has no
partner to credit, or that its algorithm does not measure it. The series come through
:func:`app.queries.chart_data`, like every other chart of the page (downsampled in SQL, a resumed run's
attempts joined on request); the arithmetic of the bar is in pure functions below."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app.components.charts import PALETTE, SpecFigure, line_spec
from app.escape import md_text, plotly_text
from app.queries import ChartData, chart_data
from db.records import Lineage, Series
from db.store import Store
from engine.schema.algorithms import unused_settings
from engine.schema.catalog import ALGORITHMS

TAIL_POINTS = 5_000
"""Points fetched for the last fifth when the whole-run lines are downsampled: up to this many steps
the bar's mean is exact; beyond, it is the mean of the kept points (each bucket's extremes)."""

CAPTION = ("**Credit**: the team reward less the team reward with that agent's reply left empty, averaged "
           "over the joint actions each step measured (`agent/<name>/credit`). Above zero the agent's reply "
           "added to the team reward; near zero the team did as well without it.")


def credit_curves(keys: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``(agent label, key)`` of every credit metric among ``keys``, sorted by key: ``agent/<name>/credit``
    as ``name``, and a system's ``trainer/<t>/agent/<name>/credit`` as ``t · name``."""
    curves = []
    for key in sorted(keys):
        if not key.endswith("/credit"):
            continue
        head = key.removesuffix("/credit")
        if head.startswith("agent/") and len(head) > len("agent/"):
            curves.append((head.removeprefix("agent/"), key))
        elif head.startswith("trainer/") and "/agent/" in head:
            trainer, _, name = head.removeprefix("trainer/").partition("/agent/")
            if trainer and name and "/" not in trainer:
                curves.append((f"{trainer} · {name}", key))
    return tuple(curves)


def last_fifth_start(first_step: float, last_step: float) -> float:
    """The first step of the last fifth of ``[first_step, last_step]``: ``last - (last - first) / 5``
    (steps 1–10: above 8.2, i.e. steps 9 and 10; a single step: that step)."""
    return last_step - (last_step - first_step) / 5


def mean_from(series: Series, start: float) -> float | None:
    """The mean of a series' finite values at ``x >= start``; None when there is none."""
    values = [y for x, y in zip(series.xs, series.ys, strict=True) if x >= start and math.isfinite(y)]
    return sum(values) / len(values) if values else None


def step_span(series: Sequence[Series]) -> tuple[float, float] | None:
    """The first and last step any of the series holds (a downsampled series keeps both ends)."""
    xs = [x for s in series for x in s.xs]
    return (min(xs), max(xs)) if xs else None


SATURATED = ("**Every agent has the same credit at every step.** Leaving either reply empty gave the same team "
             "reward (typically 0: a reward that needs every agent, such as the quick start's geometric mean), so "
             "each agent's credit is the whole team reward and this chart cannot tell the agents apart. To see "
             "which trained agent mattered, run **Evaluate** with *team analysis* (Evaluations tab): it resets "
             "one agent at a time to its untrained model.")


def identical_credit(series: Sequence[Series]) -> bool:
    """Whether two or more agents' credit series hold the same values at the same steps (removal credit
    saturated: emptying any one reply gave the same team reward)."""
    if len(series) < 2 or not series[0].xs:
        return False
    first = series[0]
    return all(s.xs == first.xs and all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
                                        for a, b in zip(s.ys, first.ys, strict=True)) for s in series[1:])


def bar_figure(means: Sequence[tuple[str, float | None]], *, title: str, height: int = 300) -> go.Figure:
    """:func:`bar_spec` as a Plotly figure."""
    return go.Figure(bar_spec(means, title=title, height=height), _validate=False)


def bar_spec(means: Sequence[tuple[str, float | None]], *, title: str, height: int = 300) -> dict:
    """One bar per agent (its mean credit, labelled with the value), coloured like its line in the
    credit chart (the same order); an agent without a value gets no bar. Plotly's own dict."""
    data = [{"type": "bar", "x": [plotly_text(name)], "y": [mean], "name": plotly_text(name),
             "text": [f"{mean:+.3f}"], "textposition": "auto", "marker": {"color": PALETTE[index % len(PALETTE)]},
             "showlegend": False}
            for index, (name, mean) in enumerate(means) if mean is not None]
    layout = {"title": {"text": plotly_text(title), "font": {"size": 13}}, "height": height,
              "margin": {"l": 40, "r": 10, "t": 40, "b": 30}, "uirevision": plotly_text(title),
              "yaxis": {"title": {"text": "mean credit"}, **ZERO_LINE}}
    return {"data": data, "layout": layout}


ZERO_LINE = {"zeroline": True, "zerolinecolor": "#888888", "zerolinewidth": 1}


def measuring_algorithms() -> tuple[str, ...]:
    """The algorithms whose trainer measures credit: those that read ``credit_samples``."""
    return tuple(name for name in ALGORITHMS if "credit_samples" not in unused_settings(name))


def no_credit_note(config: Mapping[str, Any]) -> str | None:
    """Why a run shows no credit, and how to get it; None for a system run (several trainers, each
    with its own settings), where no single note applies."""
    if config.get("system"):
        return None
    trainer = config.get("trainer") if isinstance(config.get("trainer"), Mapping) else {}
    algorithm = str(trainer.get("algorithm") or "magrpo")
    if "credit_samples" in unused_settings(algorithm):
        return (f"**Who contributed**: {md_text(algorithm)} does not measure per-agent credit; "
                f"{', '.join(measuring_algorithms())} do.")
    agents = config.get("agents")
    if isinstance(agents, Sequence) and len(agents) == 1:
        return ("**Who contributed**: a one-agent run has no partner to credit, so its credit probes never run; "
                "a team of two or more measures it when `credit_samples` is above 0.")
    if trainer.get("credit_samples") == 0:
        return ("**Who contributed**: credit probes are off in this run (`credit_samples: 0`, the default: each "
                "probe calls the reward again). Set `credit_samples` above 0 (trainer settings, *Rollout and "
                "credit*; e.g. 8) and each step measures, per agent, the team reward less the reward with its "
                "reply left empty, at one extra reward call per agent and probed joint action.")
    return ("**Who contributed**: this run has logged no credit (yet). Runs from before credit was measured have "
            "none; a new run measures it when `credit_samples` is above 0 (trainer settings, *Rollout and "
            "credit*; off by default).")


@dataclass(frozen=True)
class CreditView:
    """What the "Who contributed" section draws: whether every agent's credit is the same, the lines'
    figure and the bars' (Plotly dicts), or no figures while no credit point is logged."""

    saturated: bool
    lines: dict | None
    bars: dict | None


def credit_view(lines: ChartData, tail_of: Callable[[float, float], ChartData], *, smoothing: str = "ema",
                amount: float = 0.6) -> CreditView:
    """The section from the credit ``lines`` (downsampled whole-run series) and ``tail_of(start, end)``,
    the series of the last fifth asked for only when a line is downsampled (the bar's mean is exact up
    to :data:`TAIL_POINTS` steps)."""
    span = step_span([s for _, s in lines.series])
    if span is None:
        return CreditView(False, None, None)
    start = last_fifth_start(*span)
    tail = tail_of(start, span[1]) if any(s.downsampled for _, s in lines.series) else lines
    means = [(name, mean_from(series, start)) for name, series in tail.series]
    approx = " (≈: mean of the kept points)" if any(s.downsampled for _, s in tail.series) else ""
    figure = line_spec(lines.series, title="credit per agent", smoothing=smoothing, amount=amount,
                       boundaries=lines.boundaries)
    figure["layout"]["yaxis"] = {**figure["layout"].get("yaxis", {}), **ZERO_LINE}
    title = f"mean credit, last fifth (steps {math.ceil(start):,}–{int(span[1]):,}){approx}"
    return CreditView(identical_credit([s for _, s in lines.series]), figure, bar_spec(means, title=title))


def render_contribution(store: Store, run_id: int, keys: Sequence[str], config: Mapping[str, Any], *,
                        history: Lineage | None = None, smoothing: str = "ema", amount: float = 0.6,
                        max_points: int = 1000, view: Callable[[], CreditView] | None = None) -> None:
    """The "Who contributed" chart of a run whose metric ``keys`` include credit, else the note
    (nothing at all while the run has no metric yet). ``view`` gives the section when the caller
    holds it (a live page: from the points it holds, rebuilt only when they changed); else it is
    read from the store."""
    curves = credit_curves(keys)
    if not curves:
        note = no_credit_note(config) if keys else None
        if note:
            st.caption(note)
        return
    st.markdown("**Who contributed**")
    st.caption(CAPTION)
    if view is not None:
        shown = view()
    else:
        shown = credit_view(
            chart_data(store, run_id, curves, x="step", max_points=max_points, title="credit", history=history),
            lambda start, end: chart_data(store, run_id, curves, x="step", max_points=TAIL_POINTS,
                                          x_range=(start, end), title="credit", history=history),
            smoothing=smoothing, amount=amount)
    if shown.lines is None or shown.bars is None:
        st.caption("Who contributed: no credit points yet")
        return
    if shown.saturated:
        st.info(SATURATED, icon=":material/info:")
    left, right = st.columns([3, 2])
    left.plotly_chart(SpecFigure(shown.lines), key=f"credit.{run_id}.lines", config={"displaylogo": False})
    right.plotly_chart(SpecFigure(shown.bars), key=f"credit.{run_id}.bars", config={"displaylogo": False})
