"""A study's results: the table per point (mean ± std over seeds, sortable; rankable by a held-out
metric, from the children's evaluations of record), curves of the top points with bands, a setting →
result scatter, parallel coordinates and parameter importance, CSV, promote the best point, and its
seeds' transcripts."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app import commands
from app.components.charts import PALETTE, band_figure
from app.components.study_params import render_parameters
from app.components.study_seeds import point_label, seed_transcripts
from app.escape import md_text, plotly_text
from app.queries import compare_series
from app.seedgroups import band
from db.store import Store
from db.study_records import Study
from db.study_store import StudyStore
from jobs.study_results import PointResult, best_point, point_results, results_csv, results_rows

TOP_CHOICES = (1, 2, 3, 5, 8)


def render_results(store: Store, studies: StudyStore, study: Study) -> None:
    """The results section of the study page."""
    objective = str(study.spec.get("objective") or "train/reward_mean")
    results = point_results(studies, study.id)
    keys = sorted({k for r in results for k in r.final})
    st.subheader("Results")
    if not keys:
        st.info("No child has succeeded yet; results appear as children finish (mean and spread over their seeds).")
        return
    held_keys = sorted({k for r in results for k in r.held_out}, key=lambda k: (k != "eval/reward_mean", k))
    m1, m2 = st.columns(2)
    key = m1.selectbox("metric", keys, index=keys.index(objective) if objective in keys else 0, key="st_metric")
    held_key = m2.selectbox("held-out metric", held_keys, key="st_held_metric",
                            help="From each child's newest evaluation of record on the held-out split (Evaluate "
                                 "on a run's page, or `cooplab eval RUN`): mean and std over the point's seeds.") \
        if held_keys else None
    if held_key is None:
        m2.caption("No child has a held-out evaluation yet: evaluate the children (their run pages' Evaluate, or "
                   "`cooplab eval RUN --queue`) to rank the points by a held-out metric.")
    rows = results_rows(results, [key], [held_key] if held_key else [])
    columns = [f"{key} final mean", f"{key} final std", f"{key} best mean", f"{key} best std"]
    if held_key:
        columns += [f"{held_key} held-out mean", f"{held_key} held-out std"]
    c1, c2 = st.columns([3, 1])
    order = c1.selectbox("rank by", columns, key="st_rank")
    descending = c2.toggle("largest first", value=True, key="st_desc")
    ranked = sorted(rows, key=lambda r: (r[order] is None, -(r[order] or 0.0) if descending else (r[order] or 0.0)))
    st.dataframe(ranked, hide_index=True, key="st_table")
    st.download_button("Download CSV", results_csv(results, keys, held_keys), file_name=f"study-{study.id}-results.csv",
                       mime="text/csv", key="st_csv")
    by_point = {r.point: r for r in results}
    ranked_points = [by_point[r["point"]] for r in ranked]
    curves_tab, scatter_tab, params_tab, seeds_tab = st.tabs(["Curves of the top points", "Setting → result",
                                                              "Parameters and importance", "Seeds of a point"])
    with curves_tab:
        top = st.select_slider("top points", TOP_CHOICES, value=3, key="st_top")
        bands = []
        for result in ranked_points[:top]:
            curves = compare_series(store, list(result.counted_run_ids), key)
            bands.append((_label(result), band([(s.xs, s.ys) for _, s in curves if len(s)], "minmax")))
        st.plotly_chart(band_figure([(label, b) for label, b in bands if b.xs], title=key), key="st_curves",
                        config={"displaylogo": False})
    with scatter_tab:
        paths = list(results[0].params)
        path = st.selectbox("setting", paths, key="st_axis")
        st.plotly_chart(scatter_figure(results, path, key), key="st_scatter", config={"displaylogo": False})
    with params_tab:
        render_parameters(studies, study, key)
    with seeds_tab:
        seed_transcripts(store, studies, study, [(r.point, _label(r)) for r in results], key="st_seed")
    if held_key and order.startswith(f"{held_key} held-out"):
        _promote(store, study, results, held_key, use="held_out")
    else:
        _promote(store, study, results, key)


def _label(result: PointResult) -> str:
    return point_label(result.point, result.params)


def setting_value(value: Any) -> Any:
    """A searched setting's value as a point's x: a number as it is, anything else (text, a list, a
    mapping) as text Plotly shows literally (it draws tags in category labels and hover text)."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    return plotly_text(value)


def scatter_figure(results: list[PointResult], path: str, key: str) -> go.Figure:
    """One marker per point: the setting at ``path`` against the mean final ``key``, ± one std."""
    kept = [r for r in results if key in r.final and r.final[key].mean is not None]
    figure = go.Figure(go.Scatter(
        x=[setting_value(r.params.get(path)) for r in kept], y=[r.final[key].mean for r in kept], mode="markers",
        marker={"color": PALETTE[0], "size": 10}, text=[plotly_text(_label(r)) for r in kept],
        name=plotly_text(f"{key} final"),
        error_y={"type": "data", "array": [r.final[key].std or 0.0 for r in kept], "visible": True}))
    numeric = all(isinstance(r.params.get(path), (int, float)) for r in kept)
    positive = numeric and all((r.params.get(path) or 0) > 0 for r in kept)
    figure.update_layout(height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                         title=plotly_text(f"{path} → {key}"),
                         xaxis={"title": plotly_text(path), "type": "log" if positive else None},
                         yaxis={"title": plotly_text(f"{key} (final, mean ± std)")})
    return figure


def top_points(results: list[PointResult], key: str, *, use: str = "final") -> list[PointResult]:
    """Every point whose mean ``use`` value of ``key`` equals the largest (several: a tie), best first."""
    best = best_point(results, key, use=use)
    if best is None:
        return []
    top = getattr(best, use)[key].mean
    tied = [r for r in results if (v := getattr(r, use).get(key)) is not None and v.mean is not None
            and math.isclose(v.mean, top, rel_tol=1e-9, abs_tol=1e-12)]
    return [best, *[r for r in tied if r is not best]]


def _promote(store: Store, study: Study, results: list[PointResult], key: str, *, use: str = "final") -> None:
    tied = top_points(results, key, use=use)
    if not tied:
        return
    what = "held-out" if use == "held_out" else use
    best = tied[0]
    value = getattr(best, use)[key]
    if len(tied) > 1:
        st.markdown(f"**No single best point** by mean {what} {md_text(key)}: "
                    f"{', '.join(md_text(_label(r)) for r in tied)} tie at {value.mean:.4g}. More seeds or another "
                    "metric may separate them; promote the one you choose.")
        labels = {r.point: r for r in tied}
        best = labels[st.selectbox("point to promote", list(labels), key="st_promote_pick",
                                   format_func=lambda p: _label(labels[p]))]
    else:
        st.markdown(f"**Best point** by mean {what} {md_text(key)}: {md_text(_label(best))} · {value.mean:.4g} ± "
                    f"{value.std:.3g} over {value.n} seeds")
    if st.button("Promote to a new experiment", key="st_promote"):
        st.session_state["st_promoted"] = commands.promote_point(store, study, best.point, best.params).id
    promoted = st.session_state.get("st_promoted")
    if promoted is not None:
        st.page_link("app_pages/experiments.py", label="Open the promoted experiment",
                     query_params={"experiment": str(promoted)})
