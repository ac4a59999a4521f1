"""Runs: every run with status, progress, step rate, ETA, device, reward sparkline; launch and control."""

from __future__ import annotations

import streamlit as st

from app import context, control
from app.components.run_controls import notes_editor, run_header
from app.queries import experiment_names, run_label, runs_table
from app.runinfo import ALL_STATUSES

PAGE_SIZE = 25

store = context.store()
st.title("Runs")
names = experiment_names(store)

with st.expander("Launch a run", expanded=not store.list_runs(limit=1)):
    if not names:
        st.info("There is no experiment to launch yet. Create one on the Experiments page "
                "(first visit: the quick-start button).")
        st.page_link("app_pages/experiments.py", label="Go to Experiments", icon=":material/science:")
    else:
        l1, l2, l3 = st.columns([3, 1, 1])
        launch_exp = l1.selectbox("experiment", list(names), key="runs_launch_exp",
                                  format_func=lambda i: f"#{i} {names[i]}")
        device = l2.selectbox("device", context.devices(store), key="runs_launch_device")
        if l3.button("Launch", type="primary", key="runs_launch"):
            config = dict(store.get_experiment(launch_exp).config)
            try:
                run_id = control.launch(config, experiment_id=launch_exp, device=device)
            except control.ControlError as exc:
                st.error(str(exc))
            else:
                context.select_run(run_id)
                st.toast(f"Queued run #{run_id} on {device}.")
                st.rerun()

f1, f2, f3, f4 = st.columns([2, 2, 1, 1])
filter_exp = f1.selectbox("experiment", [None, *names], key="runs_filter_exp",
                          format_func=lambda i: "(all)" if i is None else f"#{i} {names[i]}")
statuses = f2.multiselect("status", list(ALL_STATUSES), key="runs_filter_status")
tag = f3.text_input("tag", key="runs_filter_tag") or None
page = f4.number_input("page", min_value=1, value=1, step=1, key="runs_page")


@st.fragment(run_every=context.refresh_every())
def live_runs() -> None:
    """The runs table, re-read from the database on every refresh."""
    counts = store.run_counts_by_status(filter_exp)
    shown = [s for s in ALL_STATUSES if counts.get(s)]
    if shown:
        st.caption(" · ".join(f"{s}: {counts[s]}" for s in shown))
    runs = store.list_runs(filter_exp, statuses or None, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE, tag=tag)
    if not runs:
        if sum(counts.values()) == 0:
            st.info("No runs yet. Pick an experiment under **Launch a run** above (or on the Experiments "
                    "page) and press Launch; a worker (`cooplab up` starts one) picks it up.")
        else:
            st.info("No run matches these filters (or this page is past the end).")
        return
    st.dataframe(
        runs_table(store, runs, names),
        hide_index=True,
        column_config={
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent"),
            "reward": st.column_config.LineChartColumn("team reward", width="small"),
        },
        key="runs_table",
    )


live_runs()

runs_here = store.list_runs(filter_exp, statuses or None, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE, tag=tag)
if runs_here:
    st.subheader("Run actions")
    picked = context.run_picker({r.id: run_label(r, names) for r in runs_here}, key="runs_pick")
    run = run_header(store, picked, key=f"runs.{picked}")
    if run is not None:
        notes_editor(store, run, key=f"runs.{run.id}")
        st.page_link("app_pages/run_detail.py", label=f"Open run #{run.id}: charts, config, logs", icon=":material/monitoring:",
                     query_params={"run": str(run.id)})
