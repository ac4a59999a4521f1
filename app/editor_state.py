"""Session state of the experiment editor: which experiment is open and its draft.

Loading a new draft bumps a generation number that is part of every widget key, so the widgets
start from the loaded values instead of keeping what was typed for the previous draft.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

import streamlit as st

from app import draft as drafts

DRAFT = "exp_draft"
GEN = "exp_gen"
OPEN_ID = "exp_open_id"
NOTICE = "exp_notice"
BASE = "exp_base_saved_at"


def ensure(default: dict[str, Any]) -> None:
    """Initialise the editor state on first visit with ``default`` as the draft."""
    if DRAFT not in st.session_state:
        st.session_state[DRAFT] = drafts.normalise(default)
        st.session_state[GEN] = 0
        st.session_state[OPEN_ID] = None


def load(config: dict[str, Any], experiment_id: int | None, *, saved_at: datetime | None = None) -> None:
    """Put ``config`` in the editor as the draft of ``experiment_id`` (None: a new experiment).
    ``saved_at``: the stored version's ``updated_at`` when ``config`` is that version; a draft loaded over
    the same experiment (a preset, a YAML file) keeps the version the edit started from."""
    if saved_at is not None or experiment_id != st.session_state.get(OPEN_ID):
        st.session_state[BASE] = saved_at
    st.session_state[DRAFT] = drafts.normalise(config)
    st.session_state[GEN] = st.session_state.get(GEN, 0) + 1
    st.session_state[OPEN_ID] = experiment_id


def base_saved_at() -> datetime | None:
    """When the stored version this edit started from was saved (None: unknown, or a new experiment)."""
    return st.session_state.get(BASE)


def draft() -> dict[str, Any]:
    return st.session_state[DRAFT]


def gen() -> int:
    return st.session_state[GEN]


def open_id() -> int | None:
    return st.session_state.get(OPEN_ID)


def notify(message: str) -> None:
    """A message shown once at the top of the page after the next rerun."""
    st.session_state[NOTICE] = message


def pop_notice() -> str | None:
    return st.session_state.pop(NOTICE, None)


def filled_config(config: dict[str, Any], catalog: dict[str, Any]) -> dict[str, Any]:
    """``config`` with each section's schema defaults and the task's parameter defaults filled in, as
    the form fills them, without parsing the run config."""
    from pydantic import ValidationError

    filled = drafts.normalise(config)
    task = dict(filled.get("task") or {})
    info = catalog.get(str(task.get("name") or ""))
    if info is not None:
        with contextlib.suppress(ValidationError):  # invalid parameters: compared as written
            task["params"] = info.params_model.model_validate(task.get("params") or {}).model_dump(mode="json")
    filled["task"] = task
    return filled


def effective_config(config: dict[str, Any], catalog: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every default filled in (the schema's and the task's parameter defaults), as the
    form shows it: comparing two effective configs finds real changes only."""
    from pydantic import ValidationError

    from app import context
    from engine.schema.run_config import RunConfig

    filled = filled_config(config, catalog)
    try:
        return RunConfig.model_validate(filled, context={"task_modules": context.allowed_task_modules()}
                                        ).model_dump(mode="json")
    except (ValidationError, ValueError, TypeError):
        return filled
