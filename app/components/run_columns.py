"""The runs table's column picker: run columns, config columns (any flattened config path) and metric
columns (the last, smallest or largest value of any logged metric). The choice is kept per experiment
filter in the store (``app.saved_views``, view ``runs_columns``, scope the experiment's id or ``all``): a
reload or another browser finds it again. It is read once per session and filter, checked against the
columns that exist now (a saved config path or metric no run has any more is dropped), and written only
when the user changes it; *Default columns* drops it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from app import saved_views
from app.run_table import AGGREGATES, RUN_COLUMNS, Columns
from db.store import Store

SAVED = "runs_columns"
"""``st.session_state[SAVED]``: per scope, the columns this session shows (and the saved view's name)."""

# Widths (px): the default columns fit a 1400 px window beside the sidebar with the row checkboxes.
RUN_COLUMN_CONFIG = {
    "run": st.column_config.NumberColumn("run", format="#%d", width=55),
    "name": st.column_config.TextColumn("name", width=140, help="the run's name (Rename below), else its "
                                                               "experiment"),
    "status": st.column_config.TextColumn("status", width=100),
    "step": st.column_config.TextColumn("step", width=75, help="steps done / steps planned"),
    "team reward": st.column_config.TextColumn("team reward", width=80, help="the last logged train/reward_mean"),
    "trend": st.column_config.LineChartColumn("trend", width=75, help="train/reward_mean over the run"),
    "duration": st.column_config.TextColumn("duration", width=75, help="training time so far"),
    "tags": st.column_config.TextColumn("tags", width=95),
    "notes": st.column_config.TextColumn("notes", width=140, help="the first line of the run's notes"),
    "experiment": st.column_config.TextColumn("experiment", width=115),
    "attempt": st.column_config.NumberColumn("attempt", width=65),
    "steps/s": st.column_config.TextColumn("steps/s", width=65),
    "seed": st.column_config.TextColumn("seed", width=80),
    "device": st.column_config.TextColumn("device", width=80),
    "created": st.column_config.TextColumn("created", width=130),
}


def column_config(columns: Columns) -> dict[str, object]:
    """How each shown column is drawn: run columns as above, config values as text, metric summaries
    as numbers with four significant digits."""
    config: dict[str, object] = {c: RUN_COLUMN_CONFIG[c] for c in columns.names if c in RUN_COLUMN_CONFIG}
    for path in columns.config:
        config[path] = st.column_config.TextColumn(path, width=110, help=f"config: {path}")
    for name in columns.metric_columns:
        config[name] = st.column_config.NumberColumn(name, format="%.4g", width=110)
    return config


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def columns_of(choice: Mapping[str, Any] | None, config_paths: Sequence[str], metric_keys: Sequence[str]) -> Columns:
    """The columns a saved choice names that exist now: run columns and aggregates this version knows,
    config paths of the runs listed, metrics they logged (anything else is dropped); no choice, or one
    that is not a mapping: the default columns."""
    if not isinstance(choice, Mapping):
        return Columns()
    run = set(_names(choice.get("run", list(Columns().run))))
    aggregates = set(_names(choice.get("aggregates")))
    paths, keys = set(config_paths), set(metric_keys)
    return Columns(run=tuple(c for c in RUN_COLUMNS if c in run),
                   config=tuple(dict.fromkeys(p for p in _names(choice.get("config")) if p in paths)),
                   metrics=tuple(dict.fromkeys(k for k in _names(choice.get("metrics")) if k in keys)),
                   aggregates=tuple(a for a in AGGREGATES if a in aggregates) or ("last",))


def choice_of(columns: Columns) -> dict[str, list[str]]:
    """``columns`` as the JSON object the store keeps."""
    return {"run": list(columns.run), "config": list(columns.config), "metrics": list(columns.metrics),
            "aggregates": list(columns.aggregates)}


def pick_columns(store: Store, scope: str, config_paths: Sequence[str], varying: set[str],
                 metric_keys: Sequence[str]) -> Columns:
    """The column picker (a popover) for the experiment filter ``scope``; returns the columns chosen.
    The first time a session shows ``scope`` its saved choice is loaded; a change is saved."""
    saved: dict[str, Columns] = st.session_state.setdefault(SAVED, {})
    if scope not in saved:
        saved[scope] = columns_of(saved_views.load(store, SAVED, scope), config_paths, metric_keys)
    choice = saved[scope]
    paths = sorted(config_paths, key=lambda p: (p not in varying, p))  # the settings that differ first
    with st.popover("Columns", icon=":material/view_column:"):
        run = st.multiselect("run columns", list(RUN_COLUMNS), default=list(choice.run),
                             key=f"runs_cols_run.{scope}")
        config = st.multiselect("config columns", paths, default=[p for p in choice.config if p in paths],
                                key=f"runs_cols_config.{scope}", placeholder="e.g. trainer.learning_rate",
                                format_func=lambda p: f"{p}  · differs" if p in varying else p,
                                help="Any setting of the runs' configs, by dotted path (agents.0.model is the "
                                     "first agent's model); those that differ between the runs listed first.")
        metrics = st.multiselect("metric columns", list(metric_keys),
                                 default=[k for k in choice.metrics if k in metric_keys],
                                 key=f"runs_cols_metrics.{scope}", placeholder="e.g. train/reward_mean")
        aggregates = st.multiselect("of each metric", list(AGGREGATES), default=list(choice.aggregates),
                                    key=f"runs_cols_aggs.{scope}",
                                    help="last: the last logged value; min / max: the smallest / largest "
                                         "(the best of a reward is its max, of a loss its min).")
        if st.button("Default columns", key=f"runs_cols_reset.{scope}"):
            saved[scope] = Columns()
            saved_views.forget(store, SAVED, scope)
            for prefix in ("runs_cols_run", "runs_cols_config", "runs_cols_metrics", "runs_cols_aggs"):
                st.session_state.pop(f"{prefix}.{scope}", None)
            st.rerun()
    chosen = Columns(run=tuple(c for c in RUN_COLUMNS if c in run), config=tuple(config), metrics=tuple(metrics),
                     aggregates=tuple(a for a in AGGREGATES if a in aggregates) or ("last",))
    if chosen != columns_of(choice_of(choice), config_paths, metric_keys):  # the user changed it: keep it
        saved_views.keep(store, SAVED, scope, choice_of(chosen))
    saved[scope] = chosen
    return chosen

