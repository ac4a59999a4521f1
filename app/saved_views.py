"""A dashboard user's view choices kept in the store (``Store.save_view``), so a reload or another browser
finds them again: the runs table's columns per experiment filter (``app/components/run_columns.py``) and
Compare's charts (``app/app_pages/compare.py``).

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
        store.save_view(owner(), view, scope, value)
    except ValueError as exc:
        st.warning(f"This choice is kept for this session only: {exc}.")
    loaded[key] = copy.deepcopy(value)  # refused or not: not tried again until it changes


def forget(store: Store, view: str, scope: str) -> None:
    """Drop the saved ``view`` in ``scope``: the page's defaults again, in every session that loads it."""
    store.forget_view(owner(), view, scope)
    _loaded()[f"{view}:{scope}"] = None


__all__ = ["LOADED", "OWNER", "forget", "keep", "load", "owner"]
