"""Runs: the analysis hub. Every run the filters (experiment, states, tag) and the search match, sorted
by any column over all of them and shown a page at a time; columns picked per experiment (run
columns, any config path, the last/min/max of any metric); grouped by a column with the mean and
standard deviation of the numeric columns; ticked rows overlaid in Compare; a click on a cell opens
the run; launch, rename and control a run below."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from app import commands, context
from app.components.launch import launch_options, launch_runs, launched_message
from app.components.run_columns import column_config, pick_columns
from app.components.run_controls import notes_editor, run_header
from app.control import ControlError
from app.escape import md_message, md_text
from app.live import any_active, list_every
from app.queries import experiment_names, page_cells, run_label, runs_rows
from app.run_table import Columns, Row, config_paths, group_aggregates, sort_rows
from app.runinfo import ALL_STATUSES
from db.ops_run_table import MAX_NAME_CHARS
from db.records import Run
from db.store import Store

PAGE_SIZE = 25
MAX_RUNS = 5000  # the newest runs the table sorts, searches and groups
COMPARE_MAX = 8  # as many runs as Compare overlays


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
    """What the runs table shows: an experiment, states, a tag, a search and a page."""

    experiment: int | None
    statuses: list[str]
    tag: str | None
    page: int
    query: str = ""

    @property
    def scope(self) -> str:
        """The column choice's key: one per experiment (``all`` for every experiment)."""
        return "all" if self.experiment is None else str(self.experiment)


@dataclass(frozen=True)
class View:
    """How the rows are ordered and grouped: a column to sort every run by, and one to group by."""

    sort: str
    descending: bool
    group: str | None


def filters(store: Store, names: dict[int, str]) -> RunFilter:
    f1, f2, f3, f4, f5 = st.columns([2, 2, 1.2, 2, 0.8])
    experiment = f1.selectbox("experiment", [None, *names], key="runs_filter_exp",
                              format_func=lambda i: "(all)" if i is None else f"#{i} {names[i]}")
    statuses = f2.multiselect("status", list(ALL_STATUSES), key="runs_filter_status")
    tag = f3.selectbox("tag", [None, *store.run_tags()], key="runs_filter_tag",
                       format_func=lambda t: "(any tag)" if t is None else t,
                       help="Runs carrying the tag, or of an experiment that carries it.")
    query = f4.text_input("search", key="runs_search", placeholder="name, tag, config value…",
                          help="Every word must appear in the run's #id, name, experiment, tags, state or a "
                               "config entry (path=value, e.g. learning_rate=0.001).")
    page = f5.number_input("page", min_value=1, value=1, step=1, key="runs_page")
    return RunFilter(experiment, statuses, tag, int(page), query.strip())


def view_controls(columns: Columns) -> View:
    """Sort by any shown column (over every run, not only this page), and group by one."""
    sortable = [c for c in columns.names if c != "trend"]
    v1, v2, v3 = st.columns([2, 1, 2], vertical_alignment="bottom")
    sort = v1.selectbox("sort all runs by", sortable, key="runs_sort")
    descending = v2.toggle("descending", value=True, key="runs_desc")
    group = v3.selectbox("group by", [None, *[c for c in sortable if c not in ("run", "notes")]], key="runs_group",
                         format_func=lambda c: "(no grouping)" if c is None else c,
                         help="One row per value of the column: how many runs hold it, and the mean and the "
                              "standard deviation of each numeric summary column over them.")
    return View(sort or "run", descending, group)


def open_run(run_id: int) -> None:
    """Go to the run's page (a click on a cell of its row)."""
    context.select_run(run_id)
    st.session_state["runs_table_gen"] = st.session_state.get("runs_table_gen", 0) + 1  # a fresh selection
    st.switch_page("app_pages/run_detail.py", query_params={"run": str(run_id)})


def open_compare(run_ids: list[int]) -> None:
    """Compare the selected runs, overlaid (Compare reads ``?runs=3,5``)."""
    st.session_state["runs_table_gen"] = st.session_state.get("runs_table_gen", 0) + 1
    st.switch_page("app_pages/compare.py", query_params={"runs": ",".join(str(i) for i in run_ids)})


def counts_caption(rows: list[Row]) -> None:
    """How many of the runs listed are in each state (they follow every filter and the search)."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.values["status"]] = counts.get(row.values["status"], 0) + 1
    present = [s for s in ALL_STATUSES if counts.get(s)]
    if present:
        st.caption(" · ".join(f"{s}: {counts[s]}" for s in present))


def selection_of(event: Any) -> tuple[list[int], list[int]]:
    """The rows ticked (for Compare) and the rows of the cells clicked (to open), by position."""
    selection = getattr(event, "selection", None)
    rows = list(getattr(selection, "rows", None) or [])
    cells = [cell[0] for cell in (getattr(selection, "cells", None) or [])]
    return rows, cells


def compare_bar(picked: list[int]) -> None:
    """The runs ticked and the button that overlays them in Compare."""
    c1, c2 = st.columns([3, 1], vertical_alignment="center")
    if picked:
        c1.caption("Selected for Compare: " + ", ".join(f"#{i}" for i in picked)
                   + (f" (Compare overlays at most {COMPARE_MAX})" if len(picked) > COMPARE_MAX else ""))
    else:
        c1.caption("Tick runs' boxes to compare them; click a cell to open a run.")
    if c2.button(f"Compare selected ({len(picked)})", key="runs_compare", icon=":material/compare_arrows:",
                 disabled=len(picked) < 2, type="primary" if len(picked) >= 2 else "secondary"):
        open_compare(picked[:COMPARE_MAX])


def groups_table(rows: list[Row], columns: Columns, by: str) -> None:
    """The runs grouped by one column, with the aggregates of the numeric summary columns."""
    groups = group_aggregates([r.values for r in rows], by, columns.numeric)
    st.markdown(f"**Grouped by {md_text(by)}** · {len(groups)} groups of {len(rows)} runs: mean and sample "
                "standard deviation (n − 1) of each numeric column over the runs that have a value (n).")
    st.dataframe(groups, hide_index=True, key="runs_groups",
                 column_config={c: st.column_config.NumberColumn(c, format="%.4g")
                                for c in (groups[0] if groups else {}) if c.endswith((" mean", " std"))})


def runs_section(store: Store, names: dict[int, str], shown: RunFilter, columns: Columns, view: View) -> None:
    """The runs table, re-read from the database on every refresh: every matching run sorted, this page
    shown; a click on a cell opens the run, ticked rows go to Compare."""

    active = any_active(store.run_counts_by_status())  # with none active, the table is re-read rarely

    @st.fragment(run_every=list_every(context.refresh_every(), active))
    def live_runs() -> None:
        everywhere = store.run_counts_by_status()
        if any_active(everywhere) != active:
            st.rerun()  # a run started or every run ended: poll at the matching pace
        rows = sort_rows(runs_rows(store, names, columns, experiment=shown.experiment, statuses=shown.statuses,
                                   tag=shown.tag, query=shown.query, limit=MAX_RUNS), view.sort, view.descending)
        counts_caption(rows)
        page = rows[(shown.page - 1) * PAGE_SIZE: shown.page * PAGE_SIZE]
        if not page:
            if sum(everywhere.values()) == 0:
                st.info("No runs yet. Pick an experiment under **Launch a run** above (or on the Experiments "
                        "page) and press Launch; a worker (`cooplab up` starts one) picks it up.")
            else:
                st.info("No run matches these filters (or this page is past the end).")
            return
        cells = [{c: row[c] for c in columns.names} for row in page_cells(store, page)]  # shown columns only
        event = st.dataframe(cells, hide_index=True, column_config=column_config(columns),
                             column_order=columns.names, on_select="rerun",
                             selection_mode=["multi-row", "single-cell"],
                             key=f"runs_table_{st.session_state.get('runs_table_gen', 0)}")
        pages = -(-len(rows) // PAGE_SIZE)
        st.caption(f"{len(rows)} runs, sorted by {md_text(view.sort)} over all of them"
                   + (f"; page {shown.page} of {pages}" if pages > 1 else "") + ".")
        ticked, clicked = selection_of(event)
        if clicked and 0 <= clicked[0] < len(page):
            open_run(page[clicked[0]].run_id)
        compare_bar([page[i].run_id for i in sorted(ticked) if 0 <= i < len(page)])
        if view.group:
            groups_table(rows, columns, view.group)

    live_runs()


def rename_form(store: Store, run: Run, key: str) -> None:
    """A run's display name (shown in the table, pickers and Compare's legends)."""
    with st.form(f"{key}.rename_form", border=False):
        r1, r2 = st.columns([3, 1], vertical_alignment="bottom")
        name = r1.text_input("display name", value=run.name or "", key=f"{key}.name", max_chars=MAX_NAME_CHARS,
                             placeholder="e.g. lr 1e-3, long warmup", help="Empty: the run is shown by its "
                                                                          "experiment's name.")
        if r2.form_submit_button("Rename"):
            try:
                commands.rename_run(store, run.id, name)
            except ValueError as exc:
                st.error(md_message(exc))
            else:
                st.toast("Renamed." if name.strip() else "Name removed.")
                st.rerun()


def run_actions(store: Store, names: dict[int, str], shown: RunFilter) -> None:
    """Pick one of the runs the filters match (the newest 200): its header, controls, name, tags and notes."""
    runs_here = store.list_runs(shown.experiment, shown.statuses or None, limit=200, tag=shown.tag)
    if not runs_here:
        return
    st.subheader("Run actions")
    labels = {r.id: run_label(r, names) for r in runs_here}
    current = context.selected_run()
    picked = context.run_picker(labels, key="runs_pick", current=current if current in labels else None)
    run = run_header(store, picked, key=f"runs.{picked}")
    if run is not None:
        rename_form(store, run, key=f"runs.{run.id}")
        notes_editor(store, run, key=f"runs.{run.id}")
        st.page_link("app_pages/run_detail.py", label=f"Open run #{run.id}: charts, config, logs",
                     icon=":material/monitoring:", query_params={"run": str(run.id)})


def runs_page() -> None:
    store = context.store()
    st.title("Runs")
    names = experiment_names(store)
    launch_section(store, names)
    shown = filters(store, names)
    paths, varying = config_paths(r.run.config for r in store.table_runs(shown.experiment, tag=shown.tag,
                                                                           limit=MAX_RUNS))
    p1, p2 = st.columns([1, 5], vertical_alignment="bottom")
    with p1:
        columns = pick_columns(store, shown.scope, paths, varying,
                               store.table_metric_keys(shown.experiment, tag=shown.tag))
    with p2:
        view = view_controls(columns)
    runs_section(store, names, shown, columns, view)
    run_actions(store, names, shown)


runs_page()
