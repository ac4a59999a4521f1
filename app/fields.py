"""Turn pydantic fields into form widgets and back (pure logic; the widgets live in components).

The experiment form is generated from the schemas themselves (``engine.schema.run_config.TrainerSpec``,
``AgentSpec`` and each task's params model), so a field added there shows up in the form with its
description as help text. This module decides which widget a field gets, converts values to and
from what the widget shows, and maps validation errors to dotted field paths
(``agents.1.learning_rate``) so the form can print each error next to its field.
"""

from __future__ import annotations

import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

Kind = Literal["bool", "int", "float", "str", "choice", "list_str", "json"]


@dataclass(frozen=True)
class FieldForm:
    """How one schema field is edited: widget kind, whether empty means ``None``, choices, help."""

    name: str
    kind: Kind
    optional: bool
    choices: tuple[Any, ...] = ()
    help: str | None = None
    default: Any = None


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        if len(args) == 1:
            return args[0], optional
        return annotation, optional
    return annotation, False


def field_form(name: str, info: FieldInfo) -> FieldForm:
    """Classify a pydantic field: Literal → choice, bool, int, float, str, list[str]; anything else JSON."""
    annotation, optional = _unwrap_optional(info.annotation)
    origin = typing.get_origin(annotation)
    default = None if info.default is PydanticUndefined else info.default
    if info.default_factory is not None:
        default = info.default_factory()  # type: ignore[call-arg]
    common = {"name": name, "optional": optional, "help": info.description, "default": default}
    if origin is Literal:
        return FieldForm(kind="choice", choices=typing.get_args(annotation), **common)
    if annotation is bool:
        return FieldForm(kind="bool", **common)
    if annotation is int:
        return FieldForm(kind="int", **common)
    if annotation is float:
        return FieldForm(kind="float", **common)
    if annotation is str:
        return FieldForm(kind="str", **common)
    if origin is list and typing.get_args(annotation) in ((str,), ()):
        return FieldForm(kind="list_str", **common)
    return FieldForm(kind="json", **common)


def model_forms(model: type[BaseModel], exclude: tuple[str, ...] = ()) -> list[FieldForm]:
    """The form description of every field of a pydantic model, in declaration order."""
    return [field_form(name, info) for name, info in model.model_fields.items() if name not in exclude]


def named_forms(model: type[BaseModel], names: tuple[str, ...]) -> list[FieldForm]:
    """The form descriptions of the named fields of a model, in the order of ``names``."""
    return [field_form(name, model.model_fields[name]) for name in names if name in model.model_fields]


def placed_forms(model: type[BaseModel], place: str) -> list[FieldForm]:
    """The fields a model places in one part of a form (``json_schema_extra={"form": place}``), in order."""
    return [field_form(name, info) for name, info in model.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("form") == place]


def to_text(form: FieldForm, value: Any) -> str:
    """What a text widget shows for a list or JSON field (and optional strings): '' for None."""
    if value is None:
        return ""
    if form.kind == "list_str":
        return ", ".join(str(v) for v in value)
    if form.kind == "json":
        return json.dumps(value)
    return str(value)


class FieldInputError(ValueError):
    """Text typed into a field that cannot be read as the field's type."""


def from_text(form: FieldForm, text: str) -> Any:
    """Read a text widget back: empty → ``None`` (optional) or the empty value; JSON is parsed."""
    text = text.strip()
    if form.kind == "list_str":
        if not text:
            return None if form.optional else []
        return [part.strip() for part in text.split(",") if part.strip()]
    if form.kind == "json":
        if not text:
            return None if form.optional else {}
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise FieldInputError(f"not valid JSON ({exc.msg} at character {exc.pos}); "
                                  'write e.g. {"dtype": "float32"}') from None
    if form.kind == "str":
        return None if (form.optional and not text) else text
    raise FieldInputError(f"field {form.name} of kind {form.kind} is not edited as text")


def error_paths(error: ValidationError, prefix: tuple[str | int, ...] = ()) -> dict[str, list[str]]:
    """Map each validation problem to its dotted field path; model-level problems go to the prefix.

    ``{"agents.1.learning_rate": ["Input should be greater than 0"], "": ["agent names must be ..."]}``
    """
    out: dict[str, list[str]] = {}
    for item in error.errors():
        loc = (*prefix, *item["loc"])
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
            named = _NAMED.match(message)
            if named and loc:  # a section's rule that names the field to change
                loc, message = (*loc, named.group(1)), named.group(2)
        out.setdefault(".".join(str(p) for p in loc), []).append(message)
    return out


_NAMED = re.compile(r"^([a-z_][a-z0-9_]*): (.+)$", re.DOTALL)
