"""Compare: overlaid curves of several runs per metric (or, for runs that differ only by seed, their
mean with a min–max or standard-error band), their held-out metrics side by side (each run's newest
evaluation of record; seed groups as mean ± spread), and a config diff of only what differs (defaults
filled in first). A resumed run is one history: its attempts are never taken for seeds, and its curves
join them (each step once, the later attempt winning). The curves' metrics, x axis and smoothing are kept
in the store (the saved view ``compare_charts``, ``app/saved_views.py``): a reload or another browser
shows the charts last chosen, with the metrics the runs compared share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from app import context, saved_views
from app.components.charts import band_figure, line_figure
from app.configdiff import diff_configs
from app.editor_state import effective_config
from app.escape import md_text
from app.held_out import group_rows, held_out_keys, run_rows
from app.lineages import one_per_history
from app.queries import compare_series, experiment_names, run_label, shared_metric_keys, short_label
from app.seedgroups import SeedGroup, band, group_by_seed, seed_of
from db.evaluation_store import EvaluationStore
from db.records import Lineage, Run
from db.store import Store

MAX_RUNS = 8
CHARTS = "compare_charts"  # the saved view of the curves: {"metrics": [...], "x": "step", "ema": 0.6}, scope all
X_AXES = ("step", "env_step", "wall_time")
DEFAULT_EMA = 0.6


@dataclass(frozen=True)
class Selection:
    """The runs compared: one per history (its newest attempt), their legends, their joined histories
    and their seed groups (runs whose configs differ only by seed)."""

    runs: dict[int, Run]
    legend: dict[int, str]
    picked: list[int]
    lineages: dict[int, Lineage]
    groups: list[SeedGroup]

    @property
    def seeded(self) -> list[SeedGroup]:
        return [g for g in self.groups if g.size > 1]

    def group_label(self, run_ids: tuple[int, ...]) -> str:
        if len(run_ids) == 1:
            run = self.runs[run_ids[0]]
            seed = seed_of(run.config)
            return self.legend[run.id] + (f" · seed {seed}" if seed is not None else "")
        return (f"{self.legend[run_ids[0]].split(' #')[0]} ({len(run_ids)} seeds: "
                + ", ".join(f"#{i}" for i in run_ids) + ")")


def offered_runs(store: Store) -> dict[int, Run]:
    """The 200 newest runs and those a link names (``?runs=3,5,8``, e.g. a run page's other seeds),
    which it then picks; stops the page when there are fewer than two."""
    recent = store.list_runs(limit=200)
    if len(recent) < 2:
        st.info("Comparing needs at least two runs. Launch another run (for example a clone of an "
                "experiment with one setting changed) from the Experiments page.")
        st.stop()
    runs = {r.id: r for r in recent}
    linked = [int(p) for p in st.query_params.get("runs", "").split(",") if p.strip().isdigit()]
    for run_id in linked:
        if run_id not in runs:
            try:
                runs[run_id] = store.get_run(run_id)
            except Exception:  # noqa: BLE001 - a stale link: leave that run out
                continue
    linked = [i for i in linked if i in runs][:MAX_RUNS]
    if linked and st.session_state.get("cmp_from_link") != linked:
        st.session_state["cmp_runs"] = linked
        st.session_state["cmp_from_link"] = linked
    return runs


def select_runs(store: Store, names: dict[int, str]) -> Selection:
    """The runs picker; each history once, its newest attempt standing for it, its curves joined over
    its attempts. Stops the page until two histories are picked."""
    runs = offered_runs(store)
    labels = {i: run_label(r, names) for i, r in runs.items()}
    legend = {i: short_label(r, names) for i, r in runs.items()}
    ids = list(runs)
    current = context.selected_run()
    parents = {i: r.resumed_from for i, r in runs.items()}
    # two runs of different histories: a resumed attempt is its run, not another run (nor another seed)
    default = one_per_history(ids, parents, wanted=2, first=current if current in ids else None)
    chosen = st.multiselect("runs", ids, default=None if "cmp_runs" in st.session_state else default,
                            key="cmp_runs", format_func=lambda i: labels[i], max_selections=MAX_RUNS)
    histories: dict[int, Lineage] = {}
    for run_id in chosen:
        history = store.lineage(run_id)
        histories.setdefault(history.root, history)
    for history in histories.values():
        shared = [i for i in chosen if i in history.run_ids]
        if len(shared) > 1:
            st.caption(f"{' and '.join(f'#{i}' for i in shared)} are attempts of one run: compared as one history.")
    picked = [h.latest for h in histories.values()]
    lineages = {h.latest: h for h in histories.values() if h.joined}
    for run_id in picked:
        if run_id not in runs:
            runs[run_id] = store.get_run(run_id)
        legend[run_id] = short_label(runs[run_id], names)
        if run_id in lineages:
            legend[run_id] += " (attempts " + " → ".join(f"#{i}" for i in lineages[run_id].run_ids) + ")"
    if len(picked) < 2:
        st.info("Pick at least two runs (the attempts of one resumed run count as one).")
        st.stop()
    groups = group_by_seed({run_id: dict(runs[run_id].config) for run_id in picked})
    return Selection(runs, legend, picked, lineages, groups)


def saved_charts(choice: Any, keys: list[str], preferred: list[str]) -> dict[str, Any]:
    """The saved curves' choice as the widgets take it, checked against what exists now: the saved
    metrics these runs share (none left: ``preferred``), a known x axis, an EMA weight in the slider's
    range (anything else: its default)."""
    choice = choice if isinstance(choice, dict) else {}
    names = choice.get("metrics")
    names = names if isinstance(names, list) else []
    metrics = [k for k in dict.fromkeys(k for k in names if isinstance(k, str)) if k in keys]
    x_axis = choice.get("x") if choice.get("x") in X_AXES else "step"
    weight = choice.get("ema")
    ok = isinstance(weight, int | float) and not isinstance(weight, bool) and 0.0 <= weight <= 0.99
    return {"metrics": metrics or preferred, "x": x_axis, "ema": round(float(weight), 2) if ok else DEFAULT_EMA}


def curves_tab(store: Store, chosen: Selection) -> bool:
    """Overlaid curves per metric, or seed groups' means with bands; returns whether seeds are grouped."""
    picked, seeded, groups = chosen.picked, chosen.seeded, chosen.groups
    keys = shared_metric_keys(store, picked)
    preferred = [k for k in ("train/reward_mean",) if k in keys] or keys[:1]
    saved = saved_charts(saved_views.load(store, CHARTS, "all"), keys, preferred)
    c1, c2, c3 = st.columns([3, 1, 1])
    metrics = c1.multiselect("metrics", keys, default=saved["metrics"], key="cmp_metrics")
    x_axis = c2.radio("x axis", list(X_AXES), index=X_AXES.index(saved["x"]), horizontal=True, key="cmp_x")
    weight = c3.slider("smoothing (EMA)", 0.0, 0.99, saved["ema"], 0.01, key="cmp_ema")
    shown = {"metrics": list(metrics), "x": x_axis, "ema": float(weight)}
    if shown != saved:  # the user changed it: kept for the next session
        saved_views.keep(store, CHARTS, "all", shown)
    g1, g2 = st.columns([1, 3])
    by_seed = g1.toggle("group seeds", value=bool(seeded),
                        key="cmp_by_seed", disabled=not seeded,
                        help="Runs whose configs differ only by seed become one curve: the mean over their "
                             "seeds with a band.")
    kind = g2.radio("band", ["minmax", "sem"], horizontal=True, key="cmp_band", disabled=not (by_seed and seeded),
                    format_func=lambda k: {"minmax": "min–max", "sem": "± standard error"}[k])
    if seeded:
        described = "; ".join(
            f"{md_text(chosen.legend[g.run_ids[0]].split(' #')[0])}: {len(g.run_ids)} runs, seeds "
            + ", ".join(str(s) for s in g.seeds) for g in seeded)
        st.caption(f"Runs that differ only by seed: {described}.")
    if not keys:
        st.info("None of these runs has logged metrics yet.")

    @st.fragment(run_every=context.refresh_every())
    def live_compare() -> None:
        for key in metrics:
            if by_seed and seeded:
                bands = []
                for group in groups:
                    curves = compare_series(store, list(group.run_ids), key, x=x_axis, histories=chosen.lineages)
                    bands.append((chosen.group_label(group.run_ids),
                                  band([(s.xs, s.ys) for _, s in curves if len(s)], kind)))
                figure = band_figure([(label, b) for label, b in bands if b.xs], title=key, x_name=x_axis)
            else:
                curves = compare_series(store, picked, key, x=x_axis,
                                        labels={i: chosen.group_label((i,)) for i in picked},
                                        histories=chosen.lineages)
                figure = line_figure(curves, title=key, smoothing="ema" if weight > 0 else "none", amount=weight)
            st.plotly_chart(figure, key=f"cmp.{key}", config={"displaylogo": False})

    live_compare()
    return by_seed


def held_out_tab(store: Store, chosen: Selection, by_seed: bool) -> None:
    """Each run's newest evaluation of record (seed groups as mean ± spread when grouped)."""
    picked, seeded = chosen.picked, chosen.seeded
    evaluations = EvaluationStore(store).latest_evaluations(picked)
    if not evaluations:
        st.info("None of these runs has an evaluation of record yet: **Evaluate** on a run's page (Evaluations tab) "
                "or `cooplab eval RUN` measures one on the task's held-out split.")
        return
    available = held_out_keys(evaluations)
    h1, h2 = st.columns([3, 1])
    shown = h1.multiselect("held-out metrics", available, default=available[:2], key="cmp_held_out_keys")
    spread = h2.radio("seed spread", ["sem", "minmax"], horizontal=True, key="cmp_held_out_spread",
                      disabled=not (by_seed and seeded),
                      format_func=lambda k: {"minmax": "min–max", "sem": "± standard error"}[k])
    st.caption("Each run's newest evaluation of record on the held-out split: mean ± standard error over its "
               "items." + (" Runs that differ only by seed: the mean over their evaluated seeds with the "
                           "spread chosen." if by_seed and seeded else ""))
    if by_seed and seeded:
        st.dataframe(group_rows(chosen.groups, evaluations,
                                {g.run_ids[0]: chosen.group_label(g.run_ids) for g in chosen.groups},
                                shown, spread), hide_index=True, key="cmp_held_out_groups")
    st.dataframe(run_rows(picked, evaluations, {i: chosen.group_label((i,)) for i in picked}, shown),
                 hide_index=True, key="cmp_held_out_runs")


def diff_tab(chosen: Selection) -> None:
    """Only the settings that differ, defaults filled in on every side (a default is not a difference)."""
    catalog = context.task_catalog()
    rows = diff_configs({chosen.legend[run_id]: effective_config(dict(chosen.runs[run_id].config), catalog)
                         for run_id in chosen.picked})
    if rows:
        st.caption(f"{len(rows)} setting(s) differ; identical settings are hidden.")
        st.dataframe(rows, hide_index=True)
    else:
        st.success("These runs have identical configs.")


def compare_page() -> None:
    store = context.store()
    st.title("Compare runs")
    chosen = select_runs(store, experiment_names(store))
    curves, held_out, diff = st.tabs(["Curves", "Held-out", "Config diff"])
    with curves:
        by_seed = curves_tab(store, chosen)
    with held_out:
        held_out_tab(store, chosen, by_seed)
    with diff:
        diff_tab(chosen)


compare_page()
