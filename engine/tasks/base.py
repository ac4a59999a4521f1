"""What a task is: the :class:`Task` bundle the trainer consumes.

A task bundles a dataset of items (dicts), one formatter per agent role, a team reward, an optional
external transition for multi-turn episodes and optional evaluation hooks. Its catalog entry
(:class:`TaskInfo`: title, roles, team sizes, parameter model), the parameter base class and the
error type are torch-free schema (:mod:`engine.schema.task_table`), named here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.schema.task_params import TaskParams
from engine.schema.task_table import EvalMetrics, TaskError, TaskInfo

__all__ = ["EvalMetrics", "Formatter", "Task", "TaskError", "TaskInfo", "TaskParams", "Transition"]

Formatter = Callable[..., str]
Transition = Callable[..., list[str]]


@dataclass
class Task:
    """Everything the trainer needs to train a team on one environment.

    ``formatters[i]`` builds agent ``i``'s prompt from a dataset item (``fmt(item) -> str``).
    ``reward_func`` is a :class:`engine.rewards.reward_terms.RewardTerms` object or a plain CoMLRL reward
    function. ``external_transition`` (CoMLRL's keyword-only signature) maps a joint action and the
    histories to each agent's next prompt; ``None`` means single-turn only. ``check(item,
    agent_completions)`` says whether one joint answer solves the item (used for pass@k).
    ``centralized_adapter`` is how one model writing every role lays them out in one completion
    (CoMLRL's protocol, :mod:`engine.preference.centralized`; ``None``: the ``<agent_i>`` tags), for
    ``centralized_magrpo`` and ``collaboration_mode: centralized`` runs.
    """

    name: str
    roles: list[str]
    train_dataset: Any
    formatters: list[Formatter]
    reward_func: Callable[..., Any]
    eval_dataset: Any = None
    external_transition: Transition | None = None
    eval_logger: Callable[..., list[dict[str, float]]] | None = None
    eval_aggregator: Callable[..., dict[str, float]] | None = None
    check: Callable[[dict, list[str]], bool] | None = None
    max_turns: int | None = None
    description: str = ""
    centralized_adapter: Any = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def num_agents(self) -> int:
        """Team size the task was built for (one formatter per agent)."""
        return len(self.formatters)

    def validate(self, num_agents: int | None = None) -> Task:
        """Check the bundle is internally consistent; raise :class:`TaskError` naming the problem."""
        where = f"task {self.name!r}"
        if not self.formatters:
            raise TaskError(f"{where}: formatters is empty; give one formatter per agent")
        for i, fmt in enumerate(self.formatters):
            if not callable(fmt):
                raise TaskError(f"{where}: formatters[{i}] is {type(fmt).__name__}, not a callable item -> prompt")
        if len(self.roles) != len(self.formatters):
            raise TaskError(
                f"{where}: {len(self.roles)} roles but {len(self.formatters)} formatters; give one role name per agent"
            )
        if num_agents is not None and len(self.formatters) != num_agents:
            raise TaskError(
                f"{where}: built {len(self.formatters)} formatters for a team of {num_agents} agents"
            )
        if not callable(self.reward_func):
            raise TaskError(f"{where}: reward_func is {type(self.reward_func).__name__}, not callable")
        if self.external_transition is not None and not callable(self.external_transition):
            raise TaskError(f"{where}: external_transition must be callable or None")
        if self.train_dataset is None:
            raise TaskError(f"{where}: train_dataset is missing")
        if hasattr(self.train_dataset, "__len__") and len(self.train_dataset) == 0:
            raise TaskError(f"{where}: train_dataset is empty")
        return self
