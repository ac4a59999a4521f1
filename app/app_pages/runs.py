"""Runs: every run with status, step, last team reward, duration, seed, tags and notes; filters by
status, experiment and tag; a click on a row opens the run; launch and control."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import context
from app.components.launch import launch_options, launch_runs, launched_message
from app.components.run_controls import notes_editor, run_header
from app.control import ControlError
from app.escape import md_message
from app.live import any_active, list_every
from app.queries import experiment_names, run_label, runs_table
from app.runinfo import ALL_STATUSES
from db.records import Run
from db.store import Store

PAGE_SIZE = 25
# Widths (px) so that the columns a researcher scans fit a laptop screen beside the sidebar; the
# rest (steps/s, seed, created) follow to the right.
TABLE_COLUMNS = {
    "run": st.column_config.NumberColumn("run", format="#%d", width=55),
    "status": st.column_config.TextColumn("status", width=105),
    "experiment": st.column_config.TextColumn("experiment", width=115),
    "step": st.column_config.TextColumn("step", width=80, help="steps done / steps planned"),
    "team reward": st.column_config.TextColumn("team reward", width=85, help="the last logged train/reward_mean"),
    "trend": st.column_config.LineChartColumn("trend", width=80, help="train/reward_mean over the run"),
    "duration": st.column_config.TextColumn("duration", width=80, help="training time so far"),
    "tags": st.column_config.TextColumn("tags", width=110),
    "notes": st.column_config.TextColumn("notes", width=180, help="the first line of the run's notes"),
    "steps/s": st.column_config.TextColumn("steps/s", width=65),
    "seed": st.column_config.TextColumn("seed", width=95),
    "created": st.column_config.TextColumn("created", width=130),
}


def launch_section(store: Store, names: dict[int, str]) -> None:
    """Launch a run of any experiment (device, seed and count)."""
    with st.expander("Launch a run", expanded=not store.list_runs(limit=1)):
        if not names:
            st.info("There is no experiment to launch yet. Create one on the Experiments page "
                    "(first visit: the quick-start button).")
            st.page_link("app_pages/experiments.py", label="Go to Experiments", icon=":material/science:")
            return
        l1, l2, l3, l4 = st.columns([3, 1, 1.3, 1], vertical_alignment="bottom")
        launch_exp = l1.selectbox("experiment", list(names), key="runs_launch_exp",
                                  format_func=lambda i: f"#{i} {names[i]}")
        config = dict(store.get_experiment(launch_exp).config)
        with l2:
            device = st.selectbox("device", context.devices(store), key="runs_launch_device")
        with l3.popover("seed and count", icon=":material/tune:"):
            choice = launch_options(store, launch_exp, config, key="runs_launch_opts", device=device)
        if l4.button("Launch", type="primary", key="runs_launch", icon=":material/play_arrow:"):
            try:
                run_ids = launch_runs(config, launch_exp, choice)
            except ControlError as exc:
                st.error(md_message(exc))
            else:
                context.select_run(run_ids[-1])
                st.toast(launched_message(run_ids, device))
                st.rerun()


@dataclass(frozen=True)
class RunFilter:
    """What the runs table shows: an experiment, states, a tag and a page."""

    experiment: int | None
    statuses: list[str]
    tag: str | None
    page: int

    def runs(self, store: Store) -> list[Run]:
        return store.list_runs(self.experiment, self.statuses or None, limit=PAGE_SIZE,
                               offset=(self.page - 1) * PAGE_SIZE, tag=self.tag)


def filters(store: Store, names: dict[int, str]) -> RunFilter:
    f1, f2, f3, f4 = st.columns([2, 2, 1, 1])
    experiment = f1.selectbox("experiment", [None, *names], key="runs_filter_exp",
                              format_func=lambda i: "(all)" if i is None else f"#{i} {names[i]}")
    statuses = f2.multiselect("status", list(ALL_STATUSES), key="runs_filter_status")
    tag = f3.selectbox("tag", [None, *store.run_tags()], key="runs_filter_tag",
                       format_func=lambda t: "(any tag)" if t is None else t)
    page = f4.number_input("page", min_value=1, value=1, step=1, key="runs_page")
    return RunFilter(experiment, statuses, tag, page)


def open_run(run_id: int) -> None:
    """Go to the run's page (a click on its row)."""
    context.select_run(run_id)
    st.session_state["runs_table_gen"] = st.session_state.get("runs_table_gen", 0) + 1  # a fresh selection
    st.switch_page("app_pages/run_detail.py", query_params={"run": str(run_id)})


def runs_section(store: Store, names: dict[int, str], shown: RunFilter) -> None:
    """The runs table, re-read from the database on every refresh; a click on a row opens the run."""

    active = any_active(store.run_counts_by_status())  # with none active, the table is re-read rarely

    @st.fragment(run_every=list_every(context.refresh_every(), active))
    def live_runs() -> None:
        if any_active(store.run_counts_by_status()) != active:
            st.rerun()  # a run started or every run ended: poll at the matching pace
        counts = store.run_counts_by_status(shown.experiment, tag=shown.tag)  # the counts follow the filters
        present = [s for s in ALL_STATUSES if counts.get(s)]
        if present:
            st.caption(" · ".join(f"{s}: {counts[s]}" for s in present))
        runs = shown.runs(store)
        if not runs:
            if sum(counts.values()) == 0:
                st.info("No runs yet. Pick an experiment under **Launch a run** above (or on the Experiments "
                        "page) and press Launch; a worker (`cooplab up` starts one) picks it up.")
            else:
                st.info("No run matches these filters (or this page is past the end).")
            return
        rows = runs_table(store, runs, names)
        event = st.dataframe(rows, hide_index=True, column_config=TABLE_COLUMNS, column_order=list(TABLE_COLUMNS),
                             on_select="rerun", selection_mode=["single-row", "single-cell"],
                             key=f"runs_table_{st.session_state.get('runs_table_gen', 0)}")
        st.caption("Click a run's row (any cell) to open it.")
        selection = getattr(event, "selection", None)
        picked = list(getattr(selection, "rows", None) or [])
        picked += [cell[0] for cell in (getattr(selection, "cells", None) or [])]
        if picked and 0 <= picked[0] < len(rows):
            open_run(int(rows[picked[0]]["run"]))

    live_runs()


def run_actions(store: Store, names: dict[int, str], shown: RunFilter) -> None:
    """Pick one of the runs on this page: its header, controls, tags and notes."""
    runs_here = shown.runs(store)
    if not runs_here:
        return
    st.subheader("Run actions")
    labels = {r.id: run_label(r, names) for r in runs_here}
    current = context.selected_run()
    picked = context.run_picker(labels, key="runs_pick", current=current if current in labels else None)
    run = run_header(store, picked, key=f"runs.{picked}")
    if run is not None:
        notes_editor(store, run, key=f"runs.{run.id}")
        st.page_link("app_pages/run_detail.py", label=f"Open run #{run.id}: charts, config, logs",
                     icon=":material/monitoring:", query_params={"run": str(run.id)})


def runs_page() -> None:
    store = context.store()
    st.title("Runs")
    names = experiment_names(store)
    launch_section(store, names)
    shown = filters(store, names)
    runs_section(store, names, shown)
    run_actions(store, names, shown)


runs_page()
