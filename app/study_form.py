"""The study editor's pure parts (no Streamlit): the field paths a study may search, derived from the
run-config schema as the experiment form is; value lists typed as text; the space they make; and the
config of a point to promote to an experiment."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml
from pydantic.fields import FieldInfo

from app.fields import field_form
from engine.schema.run_config import AgentSpec, TrainerSpec
from engine.schema.safe_yaml import YamlLimitError, load_yaml
from jobs.study_space import SEED_PATH, StudySpaceError, point_config

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


def parse_values(text: str) -> list[Any]:
    """``"0.001, 0.01"`` → ``[0.001, 0.01]``: comma-separated values, each read as YAML (numbers,
    booleans, ``null``), anything else kept as text (``builtin:tiny-qwen2``)."""
    items = [part.strip() for part in str(text or "").split(",")]
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


def space_from_rows(rows: Iterable[Mapping[str, Any]], allowed: Sequence[str]) -> dict[str, list[Any]]:
    """The search space of the editor's table (rows of ``path`` and ``values``); blank rows are skipped,
    a bad row raises :class:`StudySpaceError` naming its path."""
    space: dict[str, list[Any]] = {}
    for row in rows:
        path = (row.get("path") or "").strip()
        text = row.get("values")
        if not path and not (text or "").strip():
            continue
        if path not in allowed:
            raise StudySpaceError(f"{path or '(no field)'}: pick a field from the list")
        if path in space:
            raise StudySpaceError(f"{path}: appears twice; put all its values on one row")
        try:
            space[path] = parse_values(text or "")
        except StudySpaceError as exc:
            raise StudySpaceError(f"{path}: {exc}") from None
    if not space:
        raise StudySpaceError("add at least one field with its values")
    return space


def promoted_config(base: Mapping[str, Any], params: Mapping[str, Any], *, name: str) -> dict[str, Any]:
    """The base config with a point's values, named ``name``, its seed the base's own."""
    seed = int((base.get("trainer") or {}).get("seed", 0))
    config = point_config(copy.deepcopy(dict(base)), params, seed)
    config["name"] = name
    return config
