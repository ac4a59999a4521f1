"""Render the fields of a pydantic model as widgets, with each field's errors printed under it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from app.escape import md_message
from app.fields import FieldForm, FieldInputError, from_text, to_text


def show_errors(messages: Sequence[str]) -> None:
    """Print a field's validation problems right under its widget (the values they quote, from a draft
    that may come from a YAML file or another user's experiment, shown as text)."""
    for message in messages:
        st.error(md_message(message), icon=":material/error:")


def _number(form: FieldForm, value: Any, key: str) -> Any:
    is_int = form.kind == "int"
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        # a value of the wrong type (e.g. from an imported YAML file): let the user fix it as text
        text = st.text_input(form.name, value=str(value), key=key, help=form.help)
        try:
            return int(text) if is_int else float(text)
        except ValueError:
            return text
    if is_int:
        number = None if value is None else int(value)
        return st.number_input(form.name, value=number, step=1, key=key, help=form.help,
                               placeholder="default" if form.optional else None)
    number = None if value is None else float(value)
    return st.number_input(form.name, value=number, format="%g", step=None, key=key, help=form.help,
                           placeholder="default" if form.optional else None)


def render_field(form: FieldForm, value: Any, key: str) -> tuple[Any, str | None]:
    """One widget for one field; returns the new value and a problem reading the input (or None)."""
    if form.kind == "bool":
        return st.checkbox(form.name, value=bool(value), key=key, help=form.help), None
    if form.kind == "choice":
        options = list(form.choices)
        if form.optional:
            options = [None, *options]
        if value not in options:
            options.append(value)  # keep an unknown value visible; validation names the problem
        chosen = st.selectbox(form.name, options, index=options.index(value), key=key, help=form.help,
                              format_func=lambda v: "(default)" if v is None else str(v))
        return chosen, None
    if form.kind in ("int", "float"):
        return _number(form, value, key), None
    text_value = value if form.kind == "str" and isinstance(value, str) else to_text(form, value)
    text = st.text_input(form.name, value=text_value, key=key, help=form.help)
    try:
        return from_text(form, text), None
    except FieldInputError as exc:
        return text, str(exc)


def render_fields(
    forms: Sequence[FieldForm],
    values: dict[str, Any],
    *,
    key: str,
    path: str,
    slots: dict[str, Any],
    columns: int = 3,
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A grid of widgets for ``forms``; returns the edited values and input problems by field path.

    ``values`` is the current section of the draft; fields not in ``forms`` are carried over. Under
    each widget an empty slot is registered in ``slots`` (by dotted path under ``path``) so that
    :func:`place_errors` can print that field's validation errors next to it once the whole draft
    has been validated, in the same script run.
    """
    out = dict(values)
    input_errors: dict[str, list[str]] = {}
    cols = st.columns(columns)
    for index, form in enumerate(forms):
        field_path = f"{path}.{form.name}" if path else form.name
        with cols[index % columns]:
            new_value, problem = render_field(form, values.get(form.name, form.default), f"{key}.{form.name}")
            out[form.name] = new_value
            if problem:
                input_errors[field_path] = [problem]
            slots[field_path] = st.empty()
    return out, input_errors


def place_errors(slots: dict[str, Any], errors: dict[str, list[str]]) -> list[str]:
    """Print each error under its field's slot; return the messages that have no slot.

    A path like ``agents.0`` (a model-level problem of one section) goes to the nearest registered
    parent slot when there is one; the rest come back (with their paths) for a summary box.
    """
    leftovers: list[str] = []
    for path, messages in errors.items():
        slot = slots.get(path)
        probe = path
        while slot is None and "." in probe:
            probe = probe.rsplit(".", 1)[0]
            slot = slots.get(probe)
        if slot is None:
            leftovers.extend(f"{path}: {m}" if path else m for m in messages)
            continue
        with slot.container():
            show_errors(messages)
    return leftovers
