"""Run detail: live charts, config, log tail, checkpoints and downloads of one run."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app import context
from app.components.charts import line_figure
from app.components.downloads import exported_models, zip_folder
from app.components.run_controls import notes_editor, run_header
from app.metricgroups import default_charts, group_metrics
from app.queries import chart_data, experiment_names, log_tail, run_label
from db.errors import NotFoundError
from engine.spec import ConfigError, dump_run_config, parse_run_config

store = context.store()
st.title("Run detail")

names = experiment_names(store)
recent = store.list_runs(limit=200)
if not recent:
    st.info("No runs yet. Launch one from the Experiments or Runs page; its live charts appear here.")
    st.page_link("app_pages/runs.py", label="Go to Runs", icon=":material/directions_run:")
    st.stop()

current = context.selected_run()
labels = {r.id: run_label(r, names) for r in recent}
if current is not None and current not in labels:  # an older run linked directly
    try:
        labels = {current: run_label(store.get_run(current), names), **labels}
    except NotFoundError:
        context.select_run(None)
run_id = context.run_picker(labels, key="detail_pick")

run_header(store, run_id, key=f"detail.{run_id}")

charts_tab, config_tab, logs_tab, files_tab = st.tabs(["Charts", "Config", "Logs", "Checkpoints & downloads"])

with charts_tab:
    keys = store.metric_keys(run_id)
    charts = {c.title: c for c in group_metrics(keys)}
    if not charts:
        st.info("No metrics logged yet. Charts appear after the first training step "
                "(a queued run waits for a worker: `cooplab up` or `cooplab worker`).")
    c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
    # the picker is rebuilt when new metric keys appear; the user's earlier choice carries over
    remembered = st.session_state.get(f"detail_chosen_{run_id}")
    default = [t for t in remembered if t in charts] if remembered else default_charts(list(charts.values()))
    chosen = c1.multiselect("charts", list(charts), default=default,
                            key=f"detail_charts_{run_id}_{hash(tuple(charts))}")
    st.session_state[f"detail_chosen_{run_id}"] = chosen
    x_axis = c2.radio("x axis", ["step", "env_step", "wall_time"], horizontal=True, key="detail_x",
                      format_func=lambda x: {"step": "step", "env_step": "env step", "wall_time": "wall time"}[x])
    method = c3.selectbox("smoothing", ["ema", "window", "none"], key="detail_smoothing")
    if method == "ema":
        amount = c4.slider("weight", 0.0, 0.99, 0.6, 0.01, key="detail_ema")
    elif method == "window":
        amount = float(c4.slider("points", 1, 200, 10, key="detail_window"))
    else:
        amount = 0.0
    z1, z2, z3 = st.columns([1, 3, 1])
    max_points = z3.select_slider("points per curve", [250, 500, 1000, 2000, 4000], value=1000, key="detail_pts")
    x_range = None
    if x_axis == "step" and z1.toggle("zoom", key=f"detail_zoom_on_{run_id}",
                                      help="Re-query a step range at full resolution (stops following new steps)."):
        last = max(1, store.get_run(run_id).step)
        lo, hi = z2.slider("step range", 0, last, (0, last), key=f"detail_zoom_{run_id}")
        x_range = (float(lo), float(hi))

    @st.fragment(run_every=context.refresh_every())
    def live_charts() -> None:
        """The chosen charts, re-queried (downsampled in SQL) on each refresh."""
        if {c.title for c in group_metrics(store.metric_keys(run_id))} != set(charts):
            st.rerun()  # new metric keys appeared: rebuild the chart picker with them
        for title in chosen:
            chart = charts[title]
            data = chart_data(store, run_id, chart.curves, x=x_axis, max_points=max_points, x_range=x_range,
                              title=title)
            if not any(len(s) for _, s in data.series):
                st.caption(f"{title}: no points yet")
                continue
            figure = line_figure(data.series, title=title, smoothing=method, amount=amount)
            st.plotly_chart(figure, key=f"chart.{run_id}.{title}", config={"displaylogo": False})

    live_charts()

run = store.get_run(run_id)
with config_tab:
    try:
        st.code(dump_run_config(parse_run_config(dict(run.config))), language="yaml")
    except ConfigError as exc:
        st.error(f"The stored config no longer validates: {exc}")
        st.json(dict(run.config))
    notes_editor(store, run, key=f"detail.{run_id}")

with logs_tab:
    lines = st.select_slider("lines", [50, 200, 1000], value=200, key="detail_log_lines")

    @st.fragment(run_every=context.refresh_every())
    def live_log() -> None:
        path = store.get_run(run_id).log_path
        text = log_tail(path, lines=lines)
        if not text:
            st.caption("No log output yet." if path else "This run has no log file yet.")
        else:
            st.code(text, language="text")

    live_log()

with files_tab:
    checkpoints = store.list_checkpoints(run_id)
    if not checkpoints:
        st.caption("No checkpoints yet (see the trainer's checkpoint_interval).")
    for ckpt in checkpoints:
        c1, c2 = st.columns([3, 1])
        c1.markdown(f"step **{ckpt.step}** · `{ckpt.path}` · {ckpt.created_at:%Y-%m-%d %H:%M:%S}")
        if Path(ckpt.path).exists():
            c2.download_button("zip", lambda p=ckpt.path: zip_folder(p), file_name=f"run{run_id}-step{ckpt.step}.zip",
                               mime="application/zip", key=f"ckpt.{ckpt.id}")
        else:
            c2.caption("folder not on this machine")
    if checkpoints:
        st.caption("A checkpoint holds the weights (safetensors), optimizer and RNG state, for resuming "
                   "(the Resume button) or for `cooplab train --resume`.")
    st.markdown("**Exported models**")
    exported = exported_models(run.output_dir)
    if not exported:
        st.caption("A run that completes exports each agent as a Hugging Face model folder "
                   "(`<output_dir>/model`); none yet.")
    for folder in exported:
        c1, c2 = st.columns([3, 1])
        c1.markdown(f"`{folder}`: load it with `AutoModelForCausalLM.from_pretrained(path)` or use the path "
                    "as an agent's model source")
        c2.download_button("zip", lambda p=folder: zip_folder(p), file_name=f"run{run_id}-{Path(folder).name}.zip",
                           mime="application/zip", key=f"model.{folder}")
    st.divider()
    d1, d2, d3 = st.columns(3)
    d1.download_button("metrics CSV", lambda: store.export_metrics_csv(run_id), file_name=f"run{run_id}-metrics.csv",
                       mime="text/csv", key="dl_csv")
    d2.download_button("metrics JSONL", lambda: store.export_metrics_jsonl(run_id),
                       file_name=f"run{run_id}-metrics.jsonl", mime="application/jsonl", key="dl_jsonl")
    d3.download_button("transcripts JSONL", lambda: store.export_episodes_jsonl(run_id),
                       file_name=f"run{run_id}-transcripts.jsonl", mime="application/jsonl", key="dl_eps")
