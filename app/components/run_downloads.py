"""A run's metrics and transcripts to download: the whole history when the run was resumed.

A resumed run is one history of attempts (:meth:`db.store.Store.lineage`); its chart joins them, each
step once from the attempt that owns it. The downloads follow the chart: with "join attempts" on (the
default) they hold the joined history, off they hold this attempt's own rows only.
"""

from __future__ import annotations

import streamlit as st

from app.components.downloads import offer
from db.records import Run
from db.store import Store


def render_run_downloads(store: Store, run: Run) -> None:
    """Metrics CSV/JSONL and transcripts JSONL of the run (of its joined history where the chart joins it)."""
    run_id = run.id
    history = store.lineage(run_id)
    joined = history.joined and bool(st.session_state.get(f"detail_joined_{history.root}", True))
    if joined:
        attempts = ", ".join(f"#{a.run_id}" for a in history.attempts if not a.owns_nothing)
        st.caption(f"The downloads hold the whole history ({attempts}) as the chart joins it: each step once, "
                   "from the attempt that owns it. Turn \"join attempts\" off for this attempt's rows only.")
        csv, jsonl, episodes = (lambda: store.stream_lineage_metrics_csv(history),
                                lambda: store.stream_lineage_metrics_jsonl(history),
                                lambda: store.stream_lineage_episodes_jsonl(history))
        stem = f"run{run_id}-history"
    else:
        csv, jsonl, episodes = (lambda: store.stream_metrics_csv(run_id), lambda: store.stream_metrics_jsonl(run_id),
                                lambda: store.stream_episodes_jsonl(run_id))
        stem = f"run{run_id}"
    d1, d2, d3 = st.columns(3)
    with d1:
        offer("metrics CSV", csv, file_name=f"{stem}-metrics.csv", mime="text/csv", key=f"dl_csv_{run_id}")
    with d2:
        offer("metrics JSONL", jsonl, file_name=f"{stem}-metrics.jsonl", mime="application/jsonl",
              key=f"dl_jsonl_{run_id}")
    with d3:
        offer("transcripts JSONL", episodes, file_name=f"{stem}-transcripts.jsonl", mime="application/jsonl",
              key=f"dl_eps_{run_id}")
