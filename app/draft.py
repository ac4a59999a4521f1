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

from app.fields import error_paths
from app.system_draft import system_errors
from engine.schema.preflight import algorithm_problems, task_fit_problems
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
    (``trainer.num_turns``), by pre-flight's :func:`engine.schema.preflight.task_fit_problems`;
    the rest is checked by :class:`engine.schema.run_config.RunConfig`, parsed
    once, a ``system`` section's problems named under ``system``. A parsed config then goes through
    the build's own checks: the algorithm's rules
    (:func:`engine.schema.preflight.algorithm_problems`, as the run builds its trainer: settings the
    algorithm does not read at ``trainer.<name>``, IAC/MAAC settings at ``trainer.actor_critic.<key>``),
    or, given ``preflight(config)`` (the dashboard passes ``app.context.preflight_problems``), every
    pre-flight problem (those rules, model sources, ``max_new_tokens`` against each model's context,
    task parameters) at their fields. The form has no checks of its own.
    ``task_modules``: the operator's task module allowlist (``COOPLAB_TASK_MODULES``; the dashboard passes
    ``app.context.allowed_task_modules()``) a ``package.module:factory`` task or schedule must come from.
    """
    errors: dict[str, list[str]] = {}
    task_modules = tuple(task_modules)
    if task_info is not None:  # the task's own checks need no parsed config: named alongside the rest
        fit = task_fit_problems(task_info, (draft.get("task") or {}).get("params") or {},
                                len(draft.get("agents") or []), (draft.get("trainer") or {}).get("num_turns"))
        for problem in fit:
            _add(errors, {problem.field: [problem.message]})
    try:
        config = RunConfig.model_validate(draft, context={"task_modules": task_modules})  # the one parse
    except ValidationError as exc:
        _add(errors, _invalid(draft, exc, task_modules))
        return None, errors
    # the build's own checks (engine.schema.preflight): pre-flight includes the algorithm's rules
    problems = preflight(config) if preflight is not None and not errors else algorithm_problems(config, task_modules)
    for problem in problems:
        _add(errors, {problem.field: [problem.message]})
    return (config if not errors else None), errors


def _invalid(draft: dict[str, Any], exc: ValidationError, task_modules: tuple[str, ...]) -> dict[str, list[str]]:
    """The errors of a draft the schema refused, by field; a ``system`` section's problems under
    ``system`` when the rest of the draft is valid."""
    system = draft.get("system")
    if system is None:
        return error_paths(exc)
    try:
        rest = RunConfig.model_validate({k: v for k, v in draft.items() if k != "system"},
                                        context={"task_modules": task_modules})
    except ValidationError as rest_exc:
        return error_paths(rest_exc)
    problems = system_errors(rest, system, task_modules)
    return {"system": problems} if problems else error_paths(exc)


def _add(errors: dict[str, list[str]], found: dict[str, list[str]]) -> None:
    for path, messages in found.items():
        known = errors.setdefault(path, [])
        known.extend(m for m in messages if m not in known)  # the task's checks may have said it


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
