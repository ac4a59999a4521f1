"""The experiment being edited ("draft"): a plain run-config dict, and its validation by field.

The form keeps the draft as the same nested dict ``engine.schema.run_config`` reads (``agents``, ``task``,
``trainer``), so YAML import/export, presets and stored experiments all load into it unchanged.
Validation returns errors keyed by dotted field path, so each one can be printed next to its field
before anything is saved.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import yaml
from pydantic import ValidationError

from app import actor_critic_settings
from app.fields import error_paths
from app.system_draft import system_errors
from app.unused_settings import unused_setting_errors
from engine.schema.run_config import AgentSpec, RunConfig, TaskSpec, TrainerSpec, dump_run_config
from engine.schema.safe_yaml import YamlLimitError, load_yaml


def new_agent(existing: list[dict[str, Any]]) -> dict[str, Any]:
    """A default agent whose name does not clash with the existing ones (``agent_0``, ``agent_1``, ...)."""
    names = {a.get("name") for a in existing}
    index = len(existing)
    while f"agent_{index}" in names:
        index += 1
    agent = AgentSpec().model_dump(mode="json")
    agent["name"] = f"agent_{index}"
    if existing and existing[0].get("model"):
        agent["model"] = existing[0]["model"]
    return agent


def normalise(config: dict[str, Any]) -> dict[str, Any]:
    """Fill every section with the schema defaults so each field has a value to show.

    Unknown keys are kept (validation will name them), so nothing the user wrote is lost silently.
    """
    draft = copy.deepcopy(config)
    draft.setdefault("name", "experiment")
    draft.setdefault("description", "")
    draft.setdefault("tags", [])
    agents = draft.get("agents") or []
    draft["agents"] = [
        {**AgentSpec().model_dump(mode="json"), **(a if isinstance(a, dict) else {})} for a in agents
    ]
    task = draft.get("task") if isinstance(draft.get("task"), dict) else {}
    draft["task"] = {**TaskSpec().model_dump(mode="json"), **task}
    trainer = draft.get("trainer") if isinstance(draft.get("trainer"), dict) else {}
    draft["trainer"] = {**TrainerSpec().model_dump(mode="json"), **trainer}
    return draft


def validate(draft: dict[str, Any], task_info: Any = None, *,
             preflight: Callable[[RunConfig], list[Any]] | None = None,
             task_modules: tuple[str, ...] = ()) -> tuple[RunConfig | None, dict[str, list[str]]]:
    """Validate a draft; return the config (None when invalid) and the errors by dotted field path.

    With the task's catalog entry (``engine.tasks.base.TaskInfo``), task parameters are checked
    against the task's own params model (``task.params.<field>``), the team size against the sizes
    the task supports (``agents``) and the number of turns against its maximum
    (``trainer.num_turns``); the rest is checked by :class:`engine.schema.run_config.RunConfig`. IAC/MAAC
    settings are checked as the actor-critic trainers check them (``trainer.actor_critic.<key>``),
    settings the algorithm does not read are refused at their field (``trainer.<name>``), and a
    ``system`` section by :func:`engine.schema.system_spec.parse_system_spec`, its problems under ``system``.
    ``preflight(config)`` (the dashboard passes ``app.context.preflight_problems``) adds the
    pre-flight problems of an otherwise valid config (model sources, ``max_new_tokens`` against each
    model's context, task parameters) at their fields, unless a field already has its own errors.
    ``task_modules``: the operator's task module allowlist (``COOPLAB_TASK_MODULES``; the dashboard passes
    ``app.context.allowed_task_modules()``) a ``package.module:factory`` task or schedule must come from.
    """
    context = {"task_modules": tuple(task_modules)}
    errors: dict[str, list[str]] = {}
    if task_info is not None:
        try:
            task_info.params_model.model_validate(draft.get("task", {}).get("params") or {})
        except ValidationError as exc:
            errors.update(error_paths(exc, ("task", "params")))
        agents = draft.get("agents") or []
        sizes = tuple(task_info.team_sizes)
        if sizes and len(agents) not in sizes:
            errors.setdefault("agents", []).append(
                f"task {task_info.name!r} is played by {' or '.join(str(n) for n in sizes)} agent(s), "
                f"not {len(agents)}; add or remove agents"
            )
        turns = (draft.get("trainer") or {}).get("num_turns")
        if task_info.max_turns is not None and isinstance(turns, int) and turns > task_info.max_turns:
            errors.setdefault("trainer.num_turns", []).append(
                f"task {task_info.name!r} supports at most {task_info.max_turns} turn(s)"
            )
    trainer = draft.get("trainer")
    if isinstance(trainer, dict):
        problems = actor_critic_settings.validate(trainer) or unused_setting_errors(trainer)
        for path, messages in problems.items():
            errors.setdefault(path, []).extend(messages)
    system = draft.get("system")
    try:
        config = RunConfig.model_validate({k: v for k, v in draft.items() if k != "system"}, context=context)
    except ValidationError as exc:
        for path, messages in error_paths(exc).items():
            known = errors.setdefault(path, [])
            known.extend(m for m in messages if m not in known)  # the critic's checks may have said it
        return None, errors
    if system is not None:
        problems = system_errors(config, system, task_modules)
        if problems:
            errors.setdefault("system", []).extend(problems)
        else:
            config = RunConfig.model_validate(draft, context=context)
    if preflight is not None and not errors:
        for problem in preflight(config):
            errors.setdefault(problem.field, []).append(problem.message)
    return (config if not errors else None), errors


def to_yaml(config: RunConfig) -> str:
    """The YAML text `cooplab train` reads."""
    return dump_run_config(config)


class DraftImportError(ValueError):
    """An uploaded YAML file that cannot become a draft."""


def from_yaml(text: str) -> dict[str, Any]:
    """Read uploaded YAML into a draft (not yet validated: the form shows the problems by field).
    The file is read within :mod:`engine.schema.safe_yaml`'s size and alias limits."""
    try:
        data = load_yaml(text, source="the file")
    except YamlLimitError as exc:
        raise DraftImportError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise DraftImportError(f"the file is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise DraftImportError(
            "a run config must be a mapping with the sections agents, task and trainer "
            f"(got {type(data).__name__}); export one from the form to see the layout"
        )
    return normalise(data)
