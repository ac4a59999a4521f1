"""A dashboard user's view choices kept in the store (``Store.save_view``), so a reload or another browser
finds them again: the runs table's columns per experiment filter (``app/components/run_columns.py``),
Compare's charts (``app/app_pages/compare.py``) and the run page's x axis and smoothing (:func:`run_charts`).

Each choice is read from the database once per session (the first time its page draws it), and written
only when the user changes it: a rerun that changes nothing writes nothing. The page checks what it
loads against what exists now (a saved column whose metric is gone is dropped), so a stale choice never
breaks a page.

Who the choices belong to: the dashboard has one account. Listening on this machine only it is open;
on any other address it asks for the one password its operator set (``app/access.py``), which every
signed-in browser shares. So every session is the same owner, :data:`OWNER`, and a choice made in one
browser is the choice of the next.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import streamlit as st

from app import commands
from db.store import Store

OWNER = "owner"
"""The owner of every saved view: the dashboard's one account (signed in or not)."""
LOADED = "saved_views"
"""``st.session_state[LOADED]``: per ``view:scope``, the choice this session last read or wrote (None: none)."""


def owner() -> str:
    """Who the session's choices belong to (see the module's docstring)."""
    return OWNER


def _loaded() -> dict[str, dict[str, Any] | None]:
    return st.session_state.setdefault(LOADED, {})


def load(store: Store, view: str, scope: str) -> dict[str, Any] | None:
    """The choice saved for ``view`` in ``scope``: read from the store the first time this session asks,
    then the session's copy (None when nothing is saved)."""
    loaded = _loaded()
    key = f"{view}:{scope}"
    if key not in loaded:
        loaded[key] = store.saved_view(owner(), view, scope)
    return copy.deepcopy(loaded[key])


def keep(store: Store, view: str, scope: str, choice: Mapping[str, Any]) -> None:
    """Save ``choice`` for ``view`` in ``scope`` unless it is what this session last read or wrote. A
    choice the store refuses (too long) stays this session's only, with a warning saying why."""
    loaded = _loaded()
    key = f"{view}:{scope}"
    value = dict(choice)
    if key in loaded and loaded[key] == value:
        return
    try:
        commands.save_view(store, owner(), view, scope, value)
    except ValueError as exc:
        st.warning(f"This choice is kept for this session only: {exc}.")
    loaded[key] = copy.deepcopy(value)  # refused or not: not tried again until it changes


def forget(store: Store, view: str, scope: str) -> None:
    """Drop the saved ``view`` in ``scope``: the page's defaults again, in every session that loads it."""
    commands.forget_view(store, owner(), view, scope)
    _loaded()[f"{view}:{scope}"] = None


RUN_CHARTS = "run_charts"
"""The saved view of the run page's charts: x axis and smoothing (scope ``all``: every run's page)."""
X_AXES = ("step", "env_step", "wall_time")
SMOOTHINGS = ("ema", "window", "none")
RUN_CHART_DEFAULTS: dict[str, Any] = {"x": "step", "smoothing": "ema", "ema": 0.6, "window": 10}
"""The run page's x axis and smoothing until the user picks others; the EMA weight (0 to 0.99) and the
window (1 to 200 points) are its sliders' ranges."""


def _in_range(value: Any, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def run_charts(store: Store) -> dict[str, Any]:
    """The run page's saved x axis and smoothing (``{"x", "smoothing", "ema", "window"}``), each checked:
    an unknown axis or method, or an amount out of its slider's range, is its default."""
    saved = load(store, RUN_CHARTS, "all")
    saved = saved if isinstance(saved, dict) else {}
    choice = dict(RUN_CHART_DEFAULTS)
    if saved.get("x") in X_AXES:
        choice["x"] = saved["x"]
    if saved.get("smoothing") in SMOOTHINGS:
        choice["smoothing"] = saved["smoothing"]
    if _in_range(saved.get("ema"), 0.0, 0.99):
        choice["ema"] = round(float(saved["ema"]), 2)
    if _in_range(saved.get("window"), 1, 200):
        choice["window"] = int(saved["window"])
    return choice


def keep_run_charts(store: Store, shown: Mapping[str, Any], x_axis: str, method: str, amount: float) -> None:
    """Save the run page's x axis and smoothing when they differ from ``shown`` (what :func:`run_charts`
    gave the widgets): only the amount of the method in use changes."""
    choice = dict(shown, x=x_axis, smoothing=method)
    if method == "ema":
        choice["ema"] = float(amount)
    elif method == "window":
        choice["window"] = int(amount)
    if choice != dict(shown):
        keep(store, RUN_CHARTS, "all", choice)


__all__ = ["LOADED", "OWNER", "RUN_CHARTS", "RUN_CHART_DEFAULTS", "SMOOTHINGS", "X_AXES", "forget", "keep",
           "keep_run_charts", "load", "owner", "run_charts"]
