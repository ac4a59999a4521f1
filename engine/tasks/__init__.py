"""Tasks (environments): datasets, per-role formatters, team rewards, transitions, evaluation.

Importing this package is light (no torch, no ``datasets``): the dashboard reads the catalog.
``build_task`` loads datasets when a task is actually built.
"""

from engine.tasks.base import Task, TaskError, TaskInfo, TaskParams
from engine.tasks.registry import (
    ENTRY_POINT_GROUP,
    build_task,
    get_task_info,
    register_task,
    task_catalog,
    validate_params,
)
from engine.tasks.rewards import RewardError, RewardGroup, RewardTerm, RewardTerms, check_reward_values

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
    "build_task",
    "check_reward_values",
    "get_task_info",
    "register_task",
    "task_catalog",
    "validate_params",
]
