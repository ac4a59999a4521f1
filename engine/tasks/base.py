"""What a task is: the :class:`Task` bundle the trainer consumes and the :class:`TaskInfo` the catalog shows.

A task bundles a dataset of items (dicts), one formatter per agent role, a team reward, an optional
external transition for multi-turn episodes and optional evaluation hooks. :class:`TaskInfo` is the
torch-free description of a registered task (title, roles, team sizes, parameter model) that the
dashboard form and the config validator read without building anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

Formatter = Callable[..., str]
Transition = Callable[..., list[str]]


class TaskError(ValueError):
    """A task that cannot be built or used; the message names the task and what to fix."""


class TaskParams(BaseModel):
    """Base class of task parameter models: unknown keys are rejected so typos surface as errors."""

    model_config = ConfigDict(extra="forbid")


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


@dataclass(frozen=True)
class EvalMetrics:
    """What a task's evaluation reports besides the team reward: whether it has a ``check`` (then
    ``eval/pass@k`` for every k up to the samples per item, and ``eval/avg@K``) and the names of its
    own per-item metrics, ``{t}`` standing for each turn (``turn_{t}/solved``)."""

    has_check: bool = False
    own: tuple[str, ...] = ()

    def names(self, num_turns: int, samples_per_item: int) -> set[str]:
        """Every ``eval/...`` key an evaluation reports (see :meth:`TaskInfo.eval_metric_names`)."""
        turns = range(1, num_turns + 1)
        names = {"eval/reward_mean", "eval/reward_mean_se"}
        names |= {f"eval/turn_{t}/{k}" for t in turns for k in ("reward_mean", "expected_return")}
        if self.has_check:
            names |= {f"eval/pass@{k}" for k in range(1, samples_per_item + 1)} | {f"eval/avg@{samples_per_item}"}
        for pattern in self.own:
            names |= {f"eval/{pattern.format(t=t)}" for t in turns} if "{t}" in pattern else {f"eval/{pattern}"}
        return names


@dataclass(frozen=True)
class TaskInfo:
    """Catalog entry of a task: what the dashboard shows and how to build it.

    ``factory(params, num_agents) -> Task`` receives a validated instance of ``params_model``.
    ``team_sizes`` lists the supported numbers of agents; ``max_turns`` is ``None`` when any number
    of turns works (the task has a transition) and ``1`` for single-turn tasks.
    """

    name: str
    title: str
    description: str
    roles: tuple[str, ...]
    default_num_agents: int
    team_sizes: tuple[int, ...]
    max_turns: int | None
    params_model: type[BaseModel]
    factory: Callable[[Any, int], Task]
    tags: tuple[str, ...] = ()
    eval_metrics: EvalMetrics | None = None

    def eval_metric_names(self, num_turns: int, samples_per_item: int) -> set[str] | None:
        """Every ``eval/...`` metric an evaluation of this task reports with ``num_turns`` turns and
        ``samples_per_item`` answers per item; None when the task did not declare its own metrics."""
        if self.eval_metrics is None:
            return None
        return self.eval_metrics.names(num_turns, samples_per_item)

    def default_params(self) -> dict[str, Any]:
        """Parameter defaults as plain JSON-able values (for forms and presets)."""
        return self.params_model().model_dump(mode="json")

    def check_team_size(self, num_agents: int) -> None:
        """Raise :class:`TaskError` when the task cannot be played by ``num_agents`` agents."""
        if num_agents not in self.team_sizes:
            sizes = ", ".join(str(n) for n in self.team_sizes)
            raise TaskError(
                f"task {self.name!r} supports teams of {sizes} agent(s), not {num_agents}; "
                f"change the number of agents or pick another task"
            )
