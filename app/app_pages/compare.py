"""Compare: overlaid curves of several runs per metric, and a config diff of only what differs."""

from __future__ import annotations

import streamlit as st

from app import context
from app.components.charts import line_figure
from app.configdiff import diff_configs
from app.queries import compare_series, experiment_names, run_label, shared_metric_keys

store = context.store()
st.title("Compare runs")

names = experiment_names(store)
recent = store.list_runs(limit=200)
if len(recent) < 2:
    st.info("Comparing needs at least two runs. Launch another run (for example a clone of an "
            "experiment with one setting changed) from the Experiments page.")
    st.stop()
labels = {r.id: run_label(r, names) for r in recent}
ids = [r.id for r in recent]
current = context.selected_run()
default = [current] if current in ids else []
default += [i for i in ids if i not in default][: 2 - len(default)]
picked = st.multiselect("runs", ids, default=default, key="cmp_runs", format_func=lambda i: labels[i],
                        max_selections=8)
if len(picked) < 2:
    st.info("Pick at least two runs.")
    st.stop()

chart_tab, diff_tab = st.tabs(["Curves", "Config diff"])
with chart_tab:
    keys = shared_metric_keys(store, picked)
    preferred = [k for k in ("train/reward_mean",) if k in keys] or keys[:1]
    c1, c2, c3 = st.columns([3, 1, 1])
    metrics = c1.multiselect("metrics", keys, default=preferred, key="cmp_metrics")
    x_axis = c2.radio("x axis", ["step", "env_step", "wall_time"], horizontal=True, key="cmp_x")
    weight = c3.slider("smoothing (EMA)", 0.0, 0.99, 0.6, 0.01, key="cmp_ema")
    if not keys:
        st.info("None of these runs has logged metrics yet.")

    @st.fragment(run_every=context.refresh_every())
    def live_compare() -> None:
        for key in metrics:
            curves = compare_series(store, picked, key, x=x_axis)
            figure = line_figure(curves, title=key, smoothing="ema" if weight > 0 else "none", amount=weight)
            st.plotly_chart(figure, key=f"cmp.{key}", config={"displaylogo": False})

    live_compare()

with diff_tab:
    configs = {f"#{run_id}": dict(store.get_run(run_id).config) for run_id in picked}
    rows = diff_configs(configs)
    if rows:
        st.caption(f"{len(rows)} setting(s) differ; identical settings are hidden.")
        st.dataframe(rows, hide_index=True)
    else:
        st.success("These runs have identical configs.")
