"""Tasks (environments): datasets, per-role formatters, team rewards, transitions, evaluation.

Importing this package is light (no torch, no ``datasets``): the dashboard reads the catalog.
``build_task`` loads datasets when a task is actually built.
"""

from engine.rewards.reward_terms import RewardError, RewardGroup, RewardTerm, RewardTerms, check_reward_values
from engine.tasks.allowlist import allowed_task_modules, set_allowed_task_modules
from engine.tasks.base import Task, TaskError, TaskInfo, TaskParams
from engine.tasks.registry import (
    ENTRY_POINT_GROUP,
    build_task,
    check_task_name,
    get_task_info,
    register_task,
    task_catalog,
    unregister_task,
    validate_params,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "RewardError",
    "RewardGroup",
    "RewardTerm",
    "RewardTerms",
    "Task",
    "TaskError",
    "TaskInfo",
    "TaskParams",
    "allowed_task_modules",
    "build_task",
    "check_task_name",
    "check_reward_values",
    "get_task_info",
    "register_task",
    "set_allowed_task_modules",
    "task_catalog",
    "unregister_task",
    "validate_params",
]
