"""A task changed in the form: what the previous task left behind, and the new task's defaults.

Role names and lengths belong to a task: quickstart's ``max_new_tokens: 12`` and its roles ``first`` /
``second`` make no sense for a HumanEval experiment. When the task is changed, the form names each
such setting that differs from the new task's default and offers to take the defaults. A task's
defaults are its catalog roles, and ``max_new_tokens`` / ``num_turns`` from the first preset of that
task (else the schema's defaults), the turns capped at what the task supports. Pure functions.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.schema.run_config import TrainerSpec

TASK_BOUND = ("max_new_tokens", "num_turns")


@dataclass(frozen=True)
class TaskDefaults:
    """The settings a task brings: its role names and its trainer lengths."""

    task: str
    roles: tuple[str, ...]
    trainer: dict[str, Any] = field(default_factory=dict)


def task_preset(task: str, presets: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The run config of the first preset that trains ``task``, or None."""
    for entry in presets.values():
        config = entry.get("config", entry)
        if isinstance(config, Mapping) and (config.get("task") or {}).get("name") == task:
            return dict(config)
    return None


def task_defaults(info: Any, preset: Mapping[str, Any] | None) -> TaskDefaults:
    """The defaults of the task ``info`` (a catalog entry), its lengths from ``preset`` when given."""
    schema = TrainerSpec()
    written = dict((preset or {}).get("trainer") or {})
    trainer = {name: written.get(name, getattr(schema, name)) for name in TASK_BOUND}
    if info.max_turns is not None:
        trainer["num_turns"] = min(trainer["num_turns"], info.max_turns)
    return TaskDefaults(info.name, tuple(info.roles), trainer)


def carried_over(draft: Mapping[str, Any], defaults: TaskDefaults) -> list[tuple[str, Any, Any]]:
    """``(field, value now, the task's default)`` for each role name and length that differs."""
    rows: list[tuple[str, Any, Any]] = []
    for index, (agent, role) in enumerate(zip(draft.get("agents") or [], defaults.roles, strict=False)):
        if isinstance(agent, Mapping) and agent.get("name") != role:
            rows.append((f"agents.{index}.name", agent.get("name"), role))
    trainer = draft.get("trainer") or {}
    for name, value in defaults.trainer.items():
        if trainer.get(name) != value:
            rows.append((f"trainer.{name}", trainer.get(name), value))
    return rows


def with_task_defaults(draft: Mapping[str, Any], defaults: TaskDefaults) -> dict[str, Any]:
    """A copy of ``draft`` with the task's role names and lengths (agents beyond the roles keep theirs;
    an agent sharing weights with a renamed one follows the new name)."""
    out = copy.deepcopy(dict(draft))
    renamed: dict[str, str] = {}
    agents = [dict(a) for a in out.get("agents") or []]
    for agent, role in zip(agents, defaults.roles, strict=False):
        if agent.get("name") != role:
            renamed[str(agent.get("name"))] = role
            agent["name"] = role
    for agent in agents:
        if agent.get("share_weights_with") in renamed:
            agent["share_weights_with"] = renamed[agent["share_weights_with"]]
    out["agents"] = agents
    out["trainer"] = {**dict(out.get("trainer") or {}), **defaults.trainer}
    return out
