"""Building a task for the trainer: resolve its catalog entry (:mod:`engine.schema.task_registry`),
validate its parameters and team size, call its builder and check the bundle it returns.

A built-in task's builder comes from :data:`engine.tasks.builtin.BUILDERS`; a registered or plugin
task carries its own ``factory``. Datasets load here, not when a config is checked.
"""

from __future__ import annotations

import inspect
from typing import Any

from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.schema.errors import ConfigError
from engine.schema.run_config import RunConfig
from engine.schema.task_registry import get_task_info, validate_params
from engine.tasks.base import Task, TaskError
from engine.tasks.datasets import item_key, load_items, shared_items


def build_task(name_or_import_path: str, params: dict[str, Any] | None = None, num_agents: int | None = None,
               *, permissions: OperatorPermissions = LIBRARY) -> Task:
    """Build a task ready for the trainer: resolve it, validate params and team size, check the result.

    ``permissions``: the operator's; a ``package.module:factory`` must come from its ``task_modules``,
    and a built-in builder that runs model-written code gets its ``unisolated_sandbox`` (a plugin's
    factory never sees the operator's permissions)."""
    info = get_task_info(name_or_import_path, permissions.task_modules)
    team = info.default_num_agents if num_agents is None else num_agents
    info.check_team_size(team)
    validated = validate_params(info, params)
    from engine.tasks.builtin import BUILDERS  # their modules load torch; importing engine.tasks does not

    factory = info.factory if info.factory is not None else BUILDERS.get(info.name)
    if factory is None:
        raise TaskError(f"task {info.name!r}: its catalog entry names no builder (engine.tasks.builtin.BUILDERS)")
    extra: dict[str, Any] = {}
    if info.factory is None and "unisolated_sandbox" in inspect.signature(factory).parameters:
        extra["unisolated_sandbox"] = permissions.unisolated_sandbox
    try:
        task = factory(validated, team, **extra)
    except TaskError:
        raise
    except Exception as exc:
        raise TaskError(f"task {info.name!r}: building it failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(task, Task):
        raise TaskError(
            f"task {info.name!r}: the factory returned {type(task).__name__}, expected engine.tasks.Task "
            "(return Task(name=..., roles=..., train_dataset=..., formatters=..., reward_func=...))"
        )
    task.validate(team)
    for attr in ("train_dataset", "eval_dataset"):
        value = getattr(task, attr)
        if isinstance(value, (list, tuple)):
            setattr(task, attr, load_items(value) if value else None)
    if task.eval_dataset is not None:
        overlap = shared_items(task.train_dataset, task.eval_dataset)
        if overlap:
            raise TaskError(
                f"task {info.name!r}: {len(overlap)} of its {len(task.eval_dataset)} evaluation items are also "
                f"training items (the first: {item_key(overlap[0])[:160]}); a held-out result needs splits that "
                "share no item: change the task's params (its eval split or dataset) so they are disjoint"
            )
    return task


def build_task_for(config: RunConfig, num_turns: int, permissions: OperatorPermissions = LIBRARY) -> Task:
    """The run's task under the operator's ``permissions``, checked against the number of turns the trainer plays."""
    task = build_task(config.task.name, dict(config.task.params), len(config.agents), permissions=permissions)
    if num_turns > 1 and task.external_transition is None:
        raise ConfigError(f"trainer.num_turns: task {config.task.name!r} is single-turn (no transition); set 1")
    if task.max_turns is not None and num_turns > task.max_turns:
        raise ConfigError(f"trainer.num_turns: task {config.task.name!r} supports at most {task.max_turns} turns")
    return task
