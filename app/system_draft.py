"""The "system of trainers" section of a draft (``RunConfig.system``): an example, YAML, validation.

The form edits the section as YAML text. :func:`example_system` fills a new section with a valid
system for the current team (one trainer per agent, alternating for two trainers), and
:func:`system_errors` runs the engine's own check (:func:`engine.schema.system_spec.parse_system_spec`,
torch-free) so every problem is named before the experiment is saved.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import ValidationError

from engine.schema.run_config import ConfigError, RunConfig
from engine.schema.safe_yaml import YamlLimitError, load_yaml
from engine.schema.system_spec import parse_system_spec

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class SystemTextError(ValueError):
    """YAML text of the system section that cannot be read as a mapping."""


def example_system(agents: list[dict[str, Any]]) -> dict[str, Any]:
    """A valid system for these agents: one trainer per agent (agents sharing weights train together),
    alternating every 2 rounds for two trainers, round-robin for more, all together for one."""
    groups: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for index, agent in enumerate(agents):
        name = str(agent.get("name") or f"agent_{index}")
        shared = agent.get("share_weights_with")
        group = owner.get(shared) if shared else None
        if group is None:
            group = f"{_UNSAFE.sub('_', name)}_trainer"
            groups[group] = []
        groups[group].append(name)
        owner[name] = group
    trainers = [{"name": group, "agents": names} for group, names in groups.items()]
    if len(trainers) == 2:
        schedule: dict[str, Any] = {"type": "alternating", "phase_length": 2}
    elif len(trainers) > 2:
        schedule = {"type": "round_robin", "phase_length": 2}
    else:
        schedule = {"type": "all_together"}
    return {"trainers": trainers, "schedule": schedule, "items_per_round": 1}


def to_text(system: dict[str, Any]) -> str:
    """The YAML the editor shows for a system section."""
    return yaml.safe_dump(system, sort_keys=False, default_flow_style=None)


def from_text(text: str) -> dict[str, Any]:
    """Read the editor's YAML; :class:`SystemTextError` says what is wrong and how to fix it."""
    if not text.strip():
        raise SystemTextError("the system section is empty; write its trainers and schedule "
                              "(see docs/systems.md) or switch 'System of trainers' off")
    try:
        data = load_yaml(text, source="the system section")  # within engine.schema.safe_yaml's limits
    except YamlLimitError as exc:
        raise SystemTextError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise SystemTextError(f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SystemTextError(f"must be a mapping with 'trainers' and 'schedule', got {type(data).__name__}; "
                              "e.g. trainers: [{name: t1, agents: [first]}]")
    return data


def system_errors(config: RunConfig, system: Any, task_modules: tuple[str, ...] = ()) -> list[str]:
    """The problems of ``system`` for a (valid, system-less) run config, one per line; [] when valid. A
    custom schedule must come from a module of ``task_modules`` (the operator's allowlist)."""
    if not isinstance(system, dict):
        return [f"system: must be a mapping with 'trainers' and 'schedule', got {type(system).__name__}"]
    candidate = config.model_copy(update={"system": system})
    try:
        parse_system_spec(candidate, task_modules)
    except ConfigError as exc:
        return str(exc).splitlines()
    except ValidationError as exc:  # an override of the trainer fields that the schema refuses
        return [f"system: {item['msg']}" for item in exc.errors()]
    return []
