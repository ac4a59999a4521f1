"""A study point's seeds side by side: their transcripts at a step they all stored, and a link that
compares their curves. Used by the Studies page and the Transcripts page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from app.components.transcript_view import render_episode
from db.store import Store
from db.study_records import Study
from db.study_store import StudyStore


def point_label(point: int, params: Mapping[str, Any]) -> str:
    """``point 1: agent_learning_rate=0.01`` (the last part of each searched path)."""
    return f"point {point}: " + ", ".join(f"{k.split('.')[-1]}={v}" for k, v in params.items())


def seed_transcripts(store: Store, studies: StudyStore, study: Study, points: Sequence[tuple[int, str]], *,
                     key: str) -> None:
    """Pick one of ``points`` (``(point, label)``); show its seeds' episodes side by side."""
    labels = dict(points)
    point = st.selectbox("point", list(labels), key=f"{key}_point", format_func=lambda p: labels[p])
    trials = [t for t in studies.trials(study.id) if t.point == point and t.run_id is not None]
    if not trials:
        st.info("This point has no run yet.")
        return
    st.page_link("app_pages/compare.py", label="Compare these seeds' curves",
                 query_params={"runs": ",".join(str(t.run_id) for t in trials)})
    steps = [set(store.episode_steps(t.run_id)) for t in trials]
    shared = sorted(set.intersection(*steps))
    if not shared:
        st.info("These seeds share no step with stored episodes yet.")
        return
    step = st.select_slider("step", shared, value=shared[-1], key=f"{key}_step_{study.id}_{point}")
    for column, trial in zip(st.columns(len(trials)), trials, strict=True):
        with column:
            st.markdown(f"**seed {trial.seed}** · run #{trial.run_id} · {trial.status}")
            for episode in store.episodes(trial.run_id, step=step, limit=2):
                render_episode(episode, key=f"{key}_ep.{episode.id}")


def study_point_seeds(store: Store) -> None:
    """The Transcripts page's section: pick a study and a point, read its seeds side by side."""
    studies = StudyStore(store)
    found = studies.list_studies()
    if not found:
        return
    with st.expander("Compare the seeds of a study point"):
        by_id = {s.id: s for s in found}
        study_id = st.selectbox("study", list(by_id), key="tr_study", format_func=lambda i: by_id[i].name)
        points: dict[int, str] = {}
        for trial in studies.trials(study_id):
            points.setdefault(trial.point, point_label(trial.point, trial.params))
        seed_transcripts(store, studies, by_id[study_id], list(points.items()), key="tr_seed")
