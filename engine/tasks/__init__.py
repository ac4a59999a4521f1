"""Tasks (environments): datasets, per-role formatters, team rewards, transitions, evaluation.

What a config may name and each task's description (the catalog, registration, the allowlist) are
torch-free schema (:mod:`engine.schema.task_registry`, :mod:`engine.permissions.task_modules`), named
here too. ``build_task`` builds a task and loads its datasets; a script that names tasks from its own
modules passes ``permissions=OperatorPermissions(task_modules=[...])``.
"""

from engine.permissions.operator import OperatorPermissions
from engine.rewards.reward_terms import RewardGroup, RewardTerm, RewardTerms
from engine.rewards.team_reward import RewardError, check_reward_values
from engine.schema.task_registry import (
    ENTRY_POINT_GROUP,
    check_task_name,
    get_task_info,
    register_task,
    task_catalog,
    unregister_task,
    validate_params,
)
from engine.tasks.base import Task, TaskError, TaskInfo, TaskParams
from engine.tasks.building import build_task

__all__ = [
    "ENTRY_POINT_GROUP",
    "OperatorPermissions",
    "RewardError",
    "RewardGroup",
    "RewardTerm",
    "RewardTerms",
    "Task",
    "TaskError",
    "TaskInfo",
    "TaskParams",
    "build_task",
    "check_task_name",
    "check_reward_values",
    "get_task_info",
    "register_task",
    "task_catalog",
    "unregister_task",
    "validate_params",
]
