"""A study's parameters against its objective: a parallel-coordinates chart (one line per succeeded
child: its parameters, then its final objective, coloured by the objective) and each parameter's
importance, the fraction of the objective's variance it explains by binning (:mod:`app.study_params`)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app.escape import md_text, plotly_text
from app.study_params import MAX_BINS, param_importance, parcoords_axes
from db import states
from db.study_records import Study
from db.study_store import StudyStore

IMPORTANCE_NOTE = (
    "**Importance** = the fraction of the objective's variance explained by the parameter (η², by binning): "
    "the children are put in bins by the parameter's value (one bin per value, or {bins} bins of about equal "
    "count for a number with more values), and η² = between-bin sum of squares / total sum of squares of the "
    "final {key}. 0: the bins' means are equal; 1: the bins alone fix the result. Each seed counts once; with "
    "one child per bin η² is 1 whatever the parameter, so read it with the children's count.")


def trials_with_objective(studies: StudyStore, study: Study, key: str) -> list[tuple[dict, float | None]]:
    """Each succeeded child's parameters and its final ``key`` (one query for all of them)."""
    done = [t for t in studies.trials(study.id) if t.run_id is not None and t.status == states.SUCCEEDED]
    final = {s.run_id: s.final for s in studies.metric_summaries([t.run_id for t in done], [key])}
    return [(dict(t.params), final.get(t.run_id)) for t in done if t.run_id is not None]


def parcoords_figure(trials: list[tuple[dict, float | None]], paths: list[str], key: str) -> go.Figure:
    """One line per child through its parameters' axes to its objective's, coloured by the objective."""
    axes = parcoords_axes(trials, paths, key)
    for axis in axes:
        axis["label"] = plotly_text(axis["label"])
        if "ticktext" in axis:
            axis["ticktext"] = [plotly_text(t) for t in axis["ticktext"]]
    figure = go.Figure(go.Parcoords(
        line={"color": axes[-1]["values"], "colorscale": "Viridis", "showscale": True,
              "colorbar": {"title": {"text": plotly_text(key)}}},
        dimensions=axes))
    # room above the axes for their labels under the title, and at the sides for long dotted paths
    figure.update_layout(height=380, margin={"l": 110, "r": 60, "t": 90, "b": 20},
                         title={"text": plotly_text(f"parameters → final {key}"), "y": 0.97})
    return figure


def render_parameters(studies: StudyStore, study: Study, key: str) -> None:
    """The parallel-coordinates chart and the importance table of the study's parameters for ``key``."""
    trials = trials_with_objective(studies, study, key)
    paths = sorted({p for params, _ in trials for p in params})
    scored = [t for t in trials if t[1] is not None]
    if len(scored) < 2 or not paths:
        st.info("Parallel coordinates and importance need at least two succeeded children with a final "
                f"{md_text(key)}.")
        return
    st.plotly_chart(parcoords_figure(trials, paths, key), key="st_parcoords", config={"displaylogo": False})
    ranked = param_importance(trials, paths)
    st.dataframe([{"parameter": i.param, "importance (η², variance explained)": i.eta_squared, "bins": i.bins,
                   "children": i.children} for i in ranked], hide_index=True, key="st_importance",
                 column_config={"importance (η², variance explained)": st.column_config.ProgressColumn(
                     "importance (η², variance explained)", min_value=0.0, max_value=1.0, format="%.2f")})
    st.caption(IMPORTANCE_NOTE.format(bins=MAX_BINS, key=md_text(key)))
