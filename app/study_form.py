"""The study editor's pure parts (no Streamlit): the field paths a study may search, derived from the
run-config schema as the experiment form is; each field's values typed as one comma-separated text,
checked at that field (each value against the schema, with the base's other settings); the space they
make; and the config of a point to promote to an experiment."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic.fields import FieldInfo

from app.fields import field_form
from engine.schema.run_config import AgentSpec, ConfigError, TrainerSpec, parse_run_config
from engine.schema.safe_yaml import YamlLimitError, load_yaml
from jobs.study_limits import LIMIT_SETTINGS, StudyLimits
from jobs.study_space import SEED_PATH, StudySpaceError, point_config
from jobs.study_spec import parse_study_spec, study_trials

AGENT_SKIPPED = ("name", "share_weights_with")
"""Agent fields a search would break the team with (roles and sharing are structure, not settings)."""


def searchable_paths(base: Mapping[str, Any]) -> list[str]:
    """Every run-config field a study may vary for this base config: each trainer setting (the seed
    aside: seeds are the study's own axis) and each agent's settings, ``agents.<i>.<field>``."""
    trainer = [f"trainer.{name}" for name, field in TrainerSpec.model_fields.items()
               if f"trainer.{name}" != SEED_PATH and _scalar(name, field)]
    agents = [f"agents.{i}.{name}" for i in range(len(base.get("agents") or ()))
              for name, field in AgentSpec.model_fields.items() if name not in AGENT_SKIPPED and _scalar(name, field)]
    return trainer + agents


def _scalar(name: str, field: FieldInfo) -> bool:
    """True for fields holding one number, string, boolean or choice (what a list of values can vary),
    as the experiment form classifies them."""
    return field_form(name, field).kind not in ("json", "list_str")


def parse_values(text: str, *, max_values: int | None = None) -> list[Any]:
    """``"0.001, 0.01"`` → ``[0.001, 0.01]``: comma-separated values, each read as YAML (numbers,
    booleans, ``null``), anything else kept as text (``builtin:tiny-qwen2``). More than ``max_values``
    values (a study's most points) are refused before any is read."""
    text = str(text or "")
    given = text.count(",") + 1
    if max_values is not None and given > max_values:
        raise StudySpaceError(f"{given:,} values, more than a study's {max_values:,} points; list fewer, or have "
                              f"the operator raise {LIMIT_SETTINGS['max_points']}")
    items = [part.strip() for part in text.split(",")]
    if not any(items):
        raise StudySpaceError("give at least one value (comma-separated)")
    values = []
    for item in items:
        if not item:
            raise StudySpaceError(f"an empty value in {text!r}; remove the extra comma")
        try:
            values.append(load_yaml(item, source=f"the value {item[:40]!r}"))  # within engine.schema.safe_yaml's limits
        except YamlLimitError as exc:
            raise StudySpaceError(str(exc)) from None
        except yaml.YAMLError:
            values.append(item)
    return values


def base_value(base: Mapping[str, Any], path: str) -> Any:
    """The base config's value at dotted ``path`` (integer parts index lists), None when it has none."""
    node: Any = base
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return None
    return node


def value_text(value: Any) -> str:
    """A value as the values field reads it back (:func:`parse_values`): ``true``, ``null``, ``1e-05``."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).splitlines()[0]
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def default_values(base: Mapping[str, Any], path: str) -> str:
    """What a field's values start as: three learning rates around the base's own, else the base's value."""
    value = base_value(base, path)
    if path.endswith("learning_rate") and isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return f"{value / 3:.2g}, {value:g}, {value * 3:.2g}"
    return value_text(value)


def value_hint(path: str) -> str:
    """How to type a field's values, from its kind in the schema: its choices when it has a fixed set."""
    form = _form_of(path)
    if form is None:
        return "comma-separated values"
    hint = {"choice": "one or more of: " + ", ".join(value_text(c) for c in form.choices), "bool": "true, false",
            "int": "whole numbers, e.g. 2, 4", "float": "numbers, e.g. 0.0001, 0.001"}.get(
        form.kind, "comma-separated values")
    return hint + ("; null: the default" if form.optional else "")


def _form_of(path: str) -> Any:
    section, _, name = path.rpartition(".")
    model = TrainerSpec if section == "trainer" else AgentSpec if section.startswith("agents.") else None
    if model is None or name not in model.model_fields:
        return None
    return field_form(name, model.model_fields[name])


def field_values(base: Mapping[str, Any], path: str, text: str, *, check: bool = True,
                 max_values: int | None = None, task_modules: tuple[str, ...] = ()) -> list[Any]:
    """The values typed into ``path``'s field (at most ``max_values``); with ``check``, each one is set
    in the base config and validated through the run-config schema, so the values the field refuses are
    named at the field, all of them at once (``-1: <reason> · -2: <reason>``). Raises
    :class:`StudySpaceError` (without the path: the message is shown under the field). ``task_modules``:
    the operator's task module allowlist the configs are validated under."""
    values = parse_values(text, max_values=max_values)
    repeated = sorted({value_text(v) for i, v in enumerate(values) if v in values[:i]})
    if repeated:
        raise StudySpaceError(f"{', '.join(repeated)} given twice; list each value once")
    if not check:
        return values
    seed = int(base_value(base, SEED_PATH) or 0)
    refused = []  # every refused value, named at once: fixing them one per try is slow
    for value in values:
        try:
            parse_run_config(point_config(base, {path: value}, seed), task_modules=task_modules)
        except ConfigError as exc:
            reasons = [line.removeprefix(f"{path}: ") for line in str(exc).splitlines() if line.strip()]
            refused.append(f"{value_text(value)}: {'; '.join(reasons)}")
    if refused:
        raise StudySpaceError(" · ".join(refused))
    return values


def space_from_fields(base: Mapping[str, Any], texts: Mapping[str, str], *, max_values: int | None = None,
                      task_modules: tuple[str, ...] = ()) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """The search space of the editor's fields (path → the text typed for it) and each field's problem,
    by path. Values (at most ``max_values`` per field) are checked one by one against the schema when
    the base config itself is valid (otherwise the study's own check names the base's problems)."""
    try:
        parse_run_config(dict(base), task_modules=task_modules)
        check = True
    except ConfigError:
        check = False
    space: dict[str, list[Any]] = {}
    problems: dict[str, str] = {}
    for path, text in texts.items():
        try:
            space[path] = field_values(base, path, text, check=check, max_values=max_values,
                                       task_modules=task_modules)
        except StudySpaceError as exc:
            problems[path] = str(exc)
    return space, problems


def study_preview(spec: Mapping[str, Any], limits: StudyLimits,
                  task_modules: tuple[str, ...] = ()) -> tuple[int, str | None]:
    """How many runs the study ``spec`` (a plain mapping) makes, every config validated through the
    schema, or 0 and the problem. Its size is counted within ``limits`` before anything is expanded,
    so a study over a limit is refused at once (the page caches this, keyed on the spec)."""
    try:
        validate = functools.partial(parse_run_config, task_modules=task_modules)
        return len(study_trials(parse_study_spec(spec), validate, limits=limits)), None
    except StudySpaceError as exc:
        return 0, str(exc)


def promoted_config(base: Mapping[str, Any], params: Mapping[str, Any], *, name: str) -> dict[str, Any]:
    """The base config with a point's values, named ``name``, its seed the base's own."""
    seed = int((base.get("trainer") or {}).get("seed", 0))
    config = point_config(copy.deepcopy(dict(base)), params, seed)
    config["name"] = name
    return config
