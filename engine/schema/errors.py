"""Configuration errors, and turning pydantic's validation errors into lines that name each field.

Torch-free and independent of the schemas, so every schema module (the run config, the system
section) formats its errors the same way.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from engine.schema.catalog import OPERATOR_SETTINGS


class ConfigError(ValueError):
    """A run config that cannot be used; the message names each bad field and how to fix it."""


def format_validation_error(error: ValidationError, model: type[BaseModel], prefix: str = "") -> str:
    """One line per problem, ``[prefix.]field.path: message``.

    A rule's message that names a field of its section (``num_inner_epochs: ...``) is placed at that
    field; an unknown field lists the fields allowed in its section, with the closest as a hint, and an
    operator's setting (``vllm_python``) names the operator's variable instead.
    """
    lines = []
    for item in error.errors():
        loc = tuple(item["loc"])
        where = ".".join(str(p) for p in ((prefix,) if prefix else ()) + loc) or "config"
        message = item["msg"]
        if item["type"] == "value_error":
            message = message.removeprefix("Value error, ")
            if not loc and not prefix and ": " in message.split("\n", 1)[0]:
                lines.append(message)  # the message already names its field(s)
                continue
            head, named, rest = message.partition(": ")
            if named and head in section_fields(model, loc):
                where, message = f"{where}.{head}", rest
        if item["type"] == "extra_forbidden" and str(loc[-1]) in OPERATOR_SETTINGS:
            variable = OPERATOR_SETTINGS[str(loc[-1])][0]
            message = (f"names an executable, which only the operator chooses: remove it from the run config; the "
                       f"operator sets {variable} where runs train (workers, `cooplab train`)")
        elif item["type"] == "extra_forbidden":
            allowed = section_fields(model, loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            message = f"unknown field; {hint}allowed here: {', '.join(allowed)}"
        lines.append(f"{where}: {message}")
    return "\n".join(lines)


def section_fields(model: type[BaseModel], path: tuple) -> list[str]:
    """Field names of the (nested) model section at ``path``; a tagged union's tag in the path
    (``schedule.alternating``) selects its member."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", {})
        if str(part) in fields:
            members = [a for a in _flatten(fields[str(part)].annotation)
                       if isinstance(a, type) and issubclass(a, BaseModel)]
            if not members:
                return []
            current = members[0] if len(members) == 1 else {_tag(m): m for m in members}
        elif isinstance(current, dict) and str(part) in current:
            current = current[str(part)]
        else:
            return []
    return sorted(getattr(current, "model_fields", {}))


def _tag(member: type[BaseModel]) -> str:
    field = member.model_fields.get("type")
    return str(field.default) if field is not None else member.__name__


def _flatten(annotation: Any) -> list[Any]:
    args = getattr(annotation, "__args__", None)
    if not args:
        return [getattr(annotation, "__origin__", annotation)]
    out: list[Any] = []
    for arg in args:
        out.extend(_flatten(arg))
    return out
