"""Team rewards made of weighted, separately logged terms.

The trainer calls :meth:`RewardTerms.score` once per rollout node with all joint actions at once:
``agent_completions[i][j]`` is agent ``i``'s completion in joint action ``j`` and ``batch_items[j]``
the dataset item of that joint action. It returns the weighted totals and every term's raw values
(logged as ``reward/<term>``). Calling the object like a CoMLRL reward function,
``reward(*agent_completions, batch_items=..., prompts=...)``, returns the totals only.

Every term's output is checked by :func:`engine.rewards.team_reward.check_reward_values`: one finite
number per joint action, or a :class:`RewardError` naming the task and the term.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.rewards.team_reward import RewardError, check_reward_values
from engine.schema.task_table import TaskError

TermFunc = Callable[..., Sequence[float]]
GroupFunc = Callable[..., Mapping[str, Sequence[float]]]


def _where(task: str, term: str) -> str:
    return f"task {task!r}, reward {term!r}"


@dataclass
class RewardTerm:
    """One named term: ``func(agent_completions, batch_items, prompts) -> one value per joint action``."""

    name: str
    func: TermFunc
    weight: float = 1.0

    @property
    def names(self) -> list[str]:
        return [self.name]

    def weights(self) -> dict[str, float]:
        return {self.name: self.weight}

    def evaluate(self, agent_completions, batch_items, prompts, *, task: str, n: int) -> dict[str, list[float]]:
        raw = self.func(agent_completions, batch_items, prompts)
        return {self.name: check_reward_values(raw, n, _where(task, self.name))}


@dataclass
class RewardGroup:
    """Several terms computed together (they share work, e.g. one sandbox run per sample).

    ``func(agent_completions, batch_items, prompts)`` returns ``{term: values}`` for every term named
    in ``weights``.
    """

    func: GroupFunc
    weights_by_name: dict[str, float]
    label: str = "group"

    @property
    def names(self) -> list[str]:
        return list(self.weights_by_name)

    def weights(self) -> dict[str, float]:
        return dict(self.weights_by_name)

    def evaluate(self, agent_completions, batch_items, prompts, *, task: str, n: int) -> dict[str, list[float]]:
        raw = self.func(agent_completions, batch_items, prompts)
        if not isinstance(raw, Mapping):
            raise RewardError(
                f"task {task!r}, reward {self.label!r}: returned {type(raw).__name__}; "
                f"return a dict with the terms {self.names}"
            )
        missing = [name for name in self.names if name not in raw]
        if missing:
            raise RewardError(f"task {task!r}, reward {self.label!r}: missing terms {missing} in its result")
        return {name: check_reward_values(raw[name], n, _where(task, name)) for name in self.names}


@dataclass
class RewardTerms:
    """A team reward: the weighted sum of named terms, each also reported on its own."""

    task: str
    terms: list[RewardTerm | RewardGroup]
    batched: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        if not self.terms:
            raise TaskError(f"task {self.task!r}: a reward needs at least one term")
        seen: set[str] = set()
        for term in self.terms:
            for name in term.names:
                if name in seen:
                    raise TaskError(f"task {self.task!r}: reward term {name!r} is defined twice")
                seen.add(name)
            for name, weight in term.weights().items():
                if not math.isfinite(weight):
                    raise TaskError(f"task {self.task!r}: reward term {name!r} has a non-finite weight {weight}")

    @property
    def term_names(self) -> list[str]:
        return [name for term in self.terms for name in term.names]

    @property
    def weights(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for term in self.terms:
            out.update(term.weights())
        return out

    def score(
        self,
        agent_completions: Sequence[Sequence[str]],
        batch_items: Sequence[dict],
        prompts: Sequence[Sequence[str]] | None = None,
    ) -> tuple[list[float], dict[str, list[float]]]:
        """Totals and per-term values, one per joint action."""
        completions = [list(c) for c in agent_completions]
        if not completions:
            raise RewardError(f"task {self.task!r}: no agent completions to score")
        n = len(completions[0])
        for i, agent in enumerate(completions):
            if len(agent) != n:
                raise RewardError(
                    f"task {self.task!r}: agent {i} has {len(agent)} completions but agent 0 has {n}; "
                    "every agent needs one completion per joint action"
                )
        items = _broadcast(list(batch_items or [{}]), n, what="batch_items", task=self.task)
        prompt_lists = None
        if prompts is not None:
            prompt_lists = [_broadcast(list(p), n, what="prompts", task=self.task) for p in _per_agent(prompts, completions)]
        values: dict[str, list[float]] = {}
        for term in self.terms:
            values.update(term.evaluate(completions, items, prompt_lists, task=self.task, n=n))
        weights = self.weights
        totals = [sum(weights[name] * values[name][j] for name in values) for j in range(n)]
        return totals, values

    def __call__(self, *agent_completions: Sequence[str], batch_items=None, prompts=None, **_: Any) -> list[float]:
        """CoMLRL calling convention: one list of completions per agent; returns the totals."""
        if len(agent_completions) == 1 and agent_completions[0] and isinstance(agent_completions[0][0], list):
            agent_completions = tuple(agent_completions[0])  # f(all_agent_lists)
        totals, _ = self.score(list(agent_completions), batch_items or [{}], prompts)
        return totals


def _broadcast(values: list, n: int, *, what: str, task: str) -> list:
    if len(values) == n:
        return values
    if len(values) == 1:
        return values * n
    raise RewardError(f"task {task!r}: {len(values)} {what} for {n} joint actions; give one per joint action or one")


def _per_agent(prompts: Sequence, completions: list[list[str]]) -> list[list[str]]:
    """Accept prompts per agent (``[[...], [...]]``) or one list shared by all agents."""
    if prompts and isinstance(prompts[0], (list, tuple)):
        return [list(p) for p in prompts]
    return [list(prompts) for _ in completions]
