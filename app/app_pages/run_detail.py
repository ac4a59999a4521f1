"""Run detail: live charts (a resumed run's attempts joined into one history), the evaluations of
record (held-out metrics per checkpoint, team analyses, per-item outcomes), config, the log,
checkpoints and downloads of one run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import yaml

from app import context, saved_views
from app.components import live_chart
from app.components.charts import SpecFigure, line_spec
from app.components.credit_chart import (
    TAIL_POINTS,
    CreditView,
    credit_curves,
    credit_view,
    render_contribution,
)
from app.components.evaluate_control import render_evaluate
from app.components.evaluations import render_best_models, render_evaluations
from app.components.run_controls import Header, choose_run, header_box, notes_editor, poll_status
from app.components.run_downloads import render_run_downloads
from app.components.run_system import render_run_system
from app.components.stored_files import (
    local_log_offer,
    render_checkpoints,
    render_exported_models,
    render_stored_log,
)
from app.escape import md_code, md_message, md_text
from app.live import CACHE_POINTS, live_metrics, log_follow, poll_every
from app.metricgroups import applicable_keys, default_charts, group_metrics
from app.queries import (
    ChartData,
    chart_data,
    history_caption,
    history_metric_keys,
)
from app.seedgroups import same_config_runs, seed_of
from app.unused_settings import split_by_use, unread_label
from db.evaluation_store import EvaluationStore
from db.records import Lineage, Run
from db.states import TERMINAL_STATUSES
from db.store import Store
from engine.schema.run_config import ConfigError, dump_run_config, parse_run_config


@dataclass(frozen=True)
class Shown:
    """The run on the page, its history of attempts, and whether its curves join them."""

    run: Run
    history: Lineage
    joined: bool

    @property
    def run_id(self) -> int:
        return self.run.id


@dataclass
class PageStatus:
    """The header's status on the run page, drawn by the open tab's live region when it has one (one
    region polled, not two: the browser's work per poll is mostly per rerun region), else by a region
    of its own (:meth:`finish`)."""

    store: Store
    header: Header
    taken: bool = False

    def take(self) -> Callable[[], object]:
        """What a live region calls first on each run to redraw the status (the first region to ask)."""
        if self.taken:
            return lambda: None
        self.taken = True
        return lambda: self.header.follow(self.store)

    def finish(self) -> None:
        """The status as a region of its own, if no live region took it."""
        if not self.taken:
            self.taken = True
            poll_status(self.store, self.header)


def history_and_seed(store: Store, run: Run) -> Shown:
    """The run's history (resumed attempts, joined on request) and its seed, with a link comparing the
    other seeds of its config."""
    history = store.lineage(run.id)
    joined = False
    if history.joined:
        h1, h2 = st.columns([4, 1])
        h1.caption(f"History: {history_caption(history)}")
        joined = h2.toggle("join attempts", value=True, key=f"detail_joined_{history.root}",
                           help="One curve over the whole history: each step once, from the latest attempt that "
                                "logged it; dotted lines mark where each attempt begins. Off: this attempt only.")
    seed = seed_of(run.config)
    same_experiment = {r.id: r.config for r in store.list_runs(run.experiment_id, limit=200)}
    same_experiment[run.id] = run.config
    # other runs of this config with another seed (a resumed attempt keeps its run's seed: not one of them)
    siblings = [i for i in same_config_runs(run.id, same_experiment)
                if i not in history.run_ids and seed_of(same_experiment[i]) != seed]
    if seed is not None:
        line = f"seed **{seed}**"
        if siblings:
            line += f" · {len(siblings)} other run(s) of this config with another seed"
        st.markdown(line)
        if siblings:
            st.page_link("app_pages/compare.py", label="Compare the seeds (mean and band)",
                         icon=":material/stacked_line_chart:",
                         query_params={"runs": ",".join(str(i) for i in [run.id, *siblings][:8]), "by": "seed"})
    return Shown(run, history, joined)


def _task_tags(config) -> tuple[str, ...]:
    info = context.task_catalog().get(str((config.get("task") or {}).get("name") or ""))
    return tuple(getattr(info, "tags", ()) or ())


def _chart_keys(store: Store, shown: Shown) -> list[str]:
    keys = history_metric_keys(store, shown.history) if shown.joined else store.metric_keys(shown.run_id)
    return applicable_keys(keys, dict(shown.run.config), _task_tags(shown.run.config))


def _live_keys(store: Store, shown: Shown) -> tuple[list[str], tuple]:
    """The chart keys now, and the progress they were read at (what a figure drawn from the store is
    kept for). The keys are read afresh on every poll (one indexed skip-scan): a key list kept from an
    earlier poll could disagree with the picker's, built from the keys of this run of the page."""
    if shown.joined:
        marker: tuple = tuple((a.run_id, a.step, a.status) for a in store.lineage(shown.run_id).attempts)
    else:
        now = store.get_run(shown.run_id)
        marker = (now.step, now.status)
    return _chart_keys(store, shown), marker


def charts_tab(store: Store, shown: Shown, status: PageStatus) -> None:
    """The chosen charts (x axis, smoothing, points, zoom), following a live run's new points; the
    charts' region redraws the header's status too (the page's one polled region)."""
    run_id, history, joined = shown.run_id, shown.history, shown.joined
    keys = _chart_keys(store, shown)
    charts = {c.title: c for c in group_metrics(keys)}
    if not charts:
        st.info("No metrics logged yet. Charts appear after the first training step "
                "(a queued run waits for a worker: `cooplab up` or `cooplab worker`).")
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    # Until the user picks charts, the defaults follow the metrics as they appear (team reward first);
    # once picked, the choice is kept (and new charts are only offered).
    # The picker's value is set on every full run (before the widget is drawn), never left to a widget
    # state from an earlier run: a run page opened before the first step once kept an empty picker
    # ("Choose options") after the charts arrived, until a reload.
    user_choice = f"detail_user_charts_{run_id}"
    picker_key = f"detail_charts_{run_id}"
    remembered = st.session_state.get(user_choice)
    st.session_state[picker_key] = ([t for t in remembered if t in charts] if remembered is not None
                                    else default_charts(list(charts.values())))

    def _picked() -> None:
        st.session_state[user_choice] = list(st.session_state[picker_key])

    chosen = c1.multiselect("charts", list(charts), key=picker_key, on_change=_picked)
    saved = saved_views.run_charts(store)  # x axis and smoothing kept across sessions
    x_axis = c2.radio("x axis", ["step", "env_step", "wall_time"], horizontal=True, key="detail_x",
                      index=saved_views.X_AXES.index(saved["x"]),
                      format_func=lambda x: {"step": "step", "env_step": "env step", "wall_time": "wall time"}[x])
    method = c3.selectbox("smoothing", ["ema", "window", "none"], key="detail_smoothing",
                          index=saved_views.SMOOTHINGS.index(saved["smoothing"]))
    if method == "ema":
        amount = c4.slider("weight", 0.0, 0.99, saved["ema"], 0.01, key="detail_ema")
    elif method == "window":
        amount = float(c4.slider("points", 1, 200, saved["window"], key="detail_window"))
    else:
        amount = 0.0
    saved_views.keep_run_charts(store, saved, x_axis, method, amount)
    z1, z2, z3 = st.columns([1, 3, 1])
    max_points = z3.select_slider("points per curve", [250, 500, 1000, 2000, 4000], value=1000, key="detail_pts")
    x_range = None
    if x_axis == "step" and z1.toggle("zoom", key=f"detail_zoom_on_{run_id}",
                                      help="Re-query a step range at full resolution (stops following new steps)."):
        last = max(1, max(a.step for a in history.attempts) if joined else shown.run.step)
        lo, hi = z2.slider("step range", 0, last, (0, last), key=f"detail_zoom_{run_id}")
        x_range = (float(lo), float(hi))

    # An ended run's charts are drawn once (no polling); a live one's are polled, and each poll reads only
    # the points logged since the last (app.live), and rebuilds a figure only when its data changed.
    active = any(a.status not in TERMINAL_STATUSES for a in history.attempts) if joined else \
        shown.run.status not in TERMINAL_STATUSES
    credit = credit_curves(keys)
    charted = sum(len(charts[title].curves) for title in chosen) + len(credit)
    held = (live_metrics(st.session_state, run_id)
            if not joined and x_range is None and shown.run.step * charted <= CACHE_POINTS else None)
    # A live run's charts append (app.components.live_chart, all in one frame): each poll sends the browser
    # only the new points.
    # Each full run of the page sends the figures whole once (the frame may have been mounted anew).
    generation = st.session_state[f"detail_generation_{run_id}"] = \
        st.session_state.get(f"detail_generation_{run_id}", 0) + 1
    ui_files = context.settings().data_dir / "ui"
    header_status = status.take()

    @st.fragment(run_every=context.refresh_every() if active else None)
    def live_charts() -> None:
        """The header's status, then the chosen charts and who contributed, from the points held in the
        session plus the new ones (or, for a joined history, a zoomed range or a run too long to hold,
        re-queried downsampled in SQL); a figure is rebuilt only when its points or its settings changed."""
        header_status()
        keys, marker = _live_keys(store, shown)
        if {c.title for c in group_metrics(keys)} != set(charts):
            st.rerun()  # new metric keys appeared: rebuild the chart picker (and its defaults) with them
        if joined and history_caption(store.lineage(run_id)) != history_caption(history):
            st.rerun()  # an attempt began logging or ended: redraw the history line and the steps each owns
        credit_now = credit_curves(keys)
        if held is not None:
            held.refresh(store, [key for title in chosen for _, key in charts[title].curves] +
                         [key for _, key in credit_now])
        incremental = held is not None and not held.too_many
        version = held.version if incremental else marker
        drawn = st.session_state.setdefault(f"detail_figures_{run_id}", {})
        for stale in [k for k, (v, _) in drawn.items() if v != version]:
            del drawn[stale]

        def data(curves: tuple[tuple[str, str], ...], title: str, *, x: str = x_axis, points: int = max_points,
                 span: tuple[float, float] | None = x_range) -> ChartData:
            if incremental and span is None:
                return ChartData(title, tuple((label, held.series(key, x=x, max_points=points))
                                              for label, key in curves))
            return chart_data(store, run_id, curves, x=x, max_points=points, x_range=span, title=title,
                              history=history if joined else None)

        live: list[tuple[str, dict]] = []
        for title in chosen:
            look = (title, x_axis, max_points, x_range, method, amount, joined)
            if look not in drawn:
                lines = data(charts[title].curves, title)
                spec = (line_spec(lines.series, title=title, smoothing=method, amount=amount,
                                  boundaries=lines.boundaries)
                        if any(len(s) for _, s in lines.series) else None)
                drawn[look] = (version, spec)
            spec = drawn[look][1]
            if spec is None:
                st.caption(f"{md_text(title)}: no points yet")
                continue
            if active:
                live.append((f"live.{run_id}.{title}", spec))
            else:
                st.plotly_chart(SpecFigure(spec), key=f"chart.{run_id}.{title}", config={"displaylogo": False})
        if active:  # one frame for every live chart, mounted before the first one comes
            live_chart.live_charts(live, key=f"live.{run_id}", generation=generation, root=ui_files)

        def contribution() -> CreditView:
            look = ("credit", max_points, method, amount, joined)
            if look not in drawn:
                whole = data(credit_now, "credit", x="step", span=None)
                tail_points = CACHE_POINTS if incremental else TAIL_POINTS  # held points: never downsampled
                drawn[look] = (version, credit_view(
                    whole, lambda start, end: data(credit_now, "credit", x="step", points=tail_points,
                                                   span=None if incremental else (start, end)),
                    smoothing=method, amount=amount))
            return drawn[look][1]

        render_contribution(store, run_id, keys, shown.run.config, history=history if joined else None,
                            smoothing=method, amount=amount, max_points=max_points, view=contribution)

    live_charts()


def config_tab(store: Store, run: Run) -> None:
    """The settings the run's algorithm reads, the rest folded away; then its tags and notes."""
    try:
        stored = yaml.safe_load(dump_run_config(parse_run_config(dict(run.config),
                                                                 task_modules=context.allowed_task_modules())))
    except ConfigError as exc:
        st.error(md_message(f"The stored config no longer validates: {exc}"))
        st.json(dict(run.config))
    else:
        read, unread = split_by_use(stored)
        st.code(yaml.safe_dump(read, sort_keys=False), language="yaml")
        if unread:
            with st.expander(unread_label(stored, unread)):
                st.caption("Settings of other algorithms (preference pairs, reward models, comparators); "
                           "this run's algorithm never reads them.")
                st.code(yaml.safe_dump(unread, sort_keys=False), language="yaml")
    notes_editor(store, run, key=f"detail.{run.id}")


def logs_tab(store: Store, run: Run, status: PageStatus) -> None:
    """The end of the run's log, followed live, and the whole log to download; the log's region redraws
    the header's status too (the page's one polled region)."""
    run_id = run.id

    follow = log_follow(st.session_state, run_id)
    header_status = status.take()

    @st.fragment(run_every=poll_every(context.refresh_every(), run.status))  # an ended run's log is read once
    def live_log() -> None:
        """The header's status, then the end of the log: each poll reads only the bytes written since the
        last (app.live.LogFollow)."""
        header_status()
        path = store.get_run(run_id).log_path
        tail = follow.refresh(path)
        if not tail.text:
            if path and not Path(path).exists():
                return  # written on another machine: its copy in the artifact store is shown below
            st.caption("No log output yet." if path else "This run has no log file yet (it starts when a worker "
                                                          "takes the run).")
            return
        note = f"the last {tail.shown:,} lines" if tail.truncated else f"all {tail.shown:,} lines"
        st.caption(f"{md_code(path)} · {tail.size / 1024:,.1f} KiB · showing {note}, newest at the bottom")
        st.code(tail.text, language="text", height=480)

    live_log()
    if not local_log_offer(run) and run.log_path:
        render_stored_log(run)


def evaluations_tab(store: Store, run: Run) -> None:
    """Evaluate, the evaluations of record, and the best checkpoint's models."""
    render_evaluate(store, run, keeps_best=bool((run.config.get("trainer") or {}).get("best_checkpoint_metric")),
                    key=f"evaluate_{run.id}")
    render_evaluations(EvaluationStore(store).list_evaluations(run.id), run_id=run.id, output_dir=run.output_dir)
    render_best_models(store, experiment_id=run.experiment_id, output_dir=run.output_dir, key=f"best_{run.id}")


def files_tab(store: Store, run: Run) -> None:
    """Checkpoints, exported models and the run's metrics and transcripts, to download."""
    run_id = run.id
    checkpoints = store.list_checkpoints(run_id)
    if not checkpoints:
        st.caption("No checkpoints yet (see the trainer's checkpoint_interval).")
    render_checkpoints(run, checkpoints)
    if checkpoints:
        st.caption("A checkpoint holds the weights (safetensors), optimizer and RNG state, for resuming "
                   "(the Resume button) or for `cooplab train --resume`.")
    st.markdown("**Exported models**")
    render_exported_models(run)
    st.divider()
    render_run_downloads(store, run)


TAB_KEY = "tab"  # the run page's open tab: its session-state key and URL parameter (?run=3&tab=Logs)


def run_detail_page() -> None:
    store = context.store()
    st.title("Run detail")
    run_id = choose_run(store, key="detail_pick", runs_link=True,
                        when_none="No runs yet. Launch one from the Experiments or Runs page; its live charts appear "
                                  "here.")
    header = header_box(store, run_id, key=f"detail.{run_id}")
    if header is None:
        st.stop()
    run = header.run
    status = PageStatus(store, header)
    shown = history_and_seed(store, run)
    # Lazy tabs: only the open one is computed (and polled); the tab is in the URL (?tab=Logs).
    # The open tab's live region (the charts, the log) redraws the header's status too: one region per
    # poll. Another tab leaves the status a region of its own.
    tabs = {"Charts": lambda: charts_tab(store, shown, status), "Evaluations": lambda: evaluations_tab(store, run),
            "Config": lambda: config_tab(store, run), "Logs": lambda: logs_tab(store, run, status),
            "Checkpoints & downloads": lambda: files_tab(store, run),
            "System": lambda: render_run_system(store, run)}
    for container, draw in zip(st.tabs(list(tabs), key=TAB_KEY, bind="query-params"), tabs.values(), strict=True):
        if container.open is not False:
            with container:
                draw()
    status.finish()


run_detail_page()
