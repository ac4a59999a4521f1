"""Calling reward functions the way CoMLRL does, plus batched functions and reward-term objects.

Three kinds of reward are accepted, all producing one team reward per joint action:

* a plain CoMLRL function with a flexible signature (``f(*agent_completions)``, ``f(c1, c2)``,
  ``f(prompts, c1, c2)`` or ``f(all_agent_lists)``, optional ``batch_items=``/``prompts=``
  keywords). Like CoMLRL it is called once per joint action with one-element lists and its first
  value is kept;
* a function with the attribute ``batched = True``: called once per node with full lists (one entry
  per joint action) and returning one value per joint action;
* a reward-term object with ``term_names`` and ``score(agent_completions, batch_items, prompts) ->
  (totals, {term: values})``, called once per node; every term is logged as ``reward/<term>``.

Every value is checked: a wrong count or a non-finite value raises :class:`RewardError` naming the
function, so a broken reward never trains silently.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

from engine.schema.task_table import TaskError


class RewardError(TaskError):
    """A reward (function, term or group) returned something unusable: not numbers, the wrong count,
    NaN/inf. The one reward error of the engine; a :class:`TaskError`, so a ``ValueError``."""


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _positional_names(fn: Callable) -> tuple[list[str], bool, bool]:
    """(positional parameter names without defaults, has *args, has **kwargs)."""
    sig = inspect.signature(fn)
    names, var_pos, var_kw = [], False, False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            var_pos = True
        elif p.kind is p.VAR_KEYWORD:
            var_kw = True
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            names.append(p.name)
    return names, var_pos, var_kw


def _accepts_keyword(fn: Callable, name: str) -> bool:
    sig = inspect.signature(fn)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return True
    p = sig.parameters.get(name)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def call_reward_function(
    fn: Callable,
    agent_completions: Sequence[Sequence[str]],
    *,
    batch_items: Sequence[dict] | None = None,
    prompts: Sequence[Sequence[str]] | None = None,
) -> list[float]:
    """Call ``fn`` with CoMLRL's flexible conventions and return its values as floats.

    ``agent_completions[i]`` is agent i's list of completions; ``prompts`` has the same shape.
    """
    num_agents = len(agent_completions)
    names, var_pos, _ = _positional_names(fn)
    kwargs: dict[str, Any] = {}
    positional_names = set(names)
    if "batch_items" not in positional_names and _accepts_keyword(fn, "batch_items"):
        kwargs["batch_items"] = list(batch_items) if batch_items is not None else None
    lists = [list(c) for c in agent_completions]
    if var_pos:
        args: list[Any] = lists
    elif len(names) == num_agents + 1 and names[0] == "prompts":
        args = [[list(p) for p in prompts] if prompts is not None else None, *lists]
    elif len(names) == num_agents:
        args = lists
    elif len(names) == 1:
        args = [lists]
    else:
        raise RewardError(
            f"reward function {_name(fn)}{inspect.signature(fn)} does not fit a team of {num_agents}: "
            f"use f(*agent_completions), one positional parameter per agent, f(prompts, c1, ..., cN) "
            f"or f(all_agent_completions), with optional batch_items=/prompts= keywords"
        )
    if "prompts" not in positional_names and _accepts_keyword(fn, "prompts"):
        kwargs["prompts"] = [list(p) for p in prompts] if prompts is not None else None
    return _floats(fn(*args, **kwargs), f"reward function {_name(fn)}")


def _floats(value: Any, source: str) -> list[float]:
    """A reward return value (a number, list, tuple, numpy array or tensor) as a flat list of floats."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().reshape(-1).tolist()
    elif hasattr(value, "tolist") and not isinstance(value, list | tuple):
        value = value.tolist()
    if isinstance(value, int | float):
        value = [value]
    if not isinstance(value, list | tuple):
        raise RewardError(f"{source} returned {type(value).__name__}; return one float per joint action")
    out = []
    for index, item in enumerate(value):
        try:
            out.append(float(item))
        except (TypeError, ValueError):
            raise RewardError(f"{source}: value {index} is {item!r}, not a number") from None
    return out


def check_reward_values(values: Any, expected: int, source: str) -> list[float]:
    """``values`` as ``expected`` finite floats, or a :class:`RewardError` naming ``source`` (``"reward
    function f"``, ``"task 't', reward 'x'"``) and what to fix. Every reward value passes here."""
    floats = _floats(values, source)
    if len(floats) != expected:
        raise RewardError(f"{source} returned {len(floats)} value(s) for {expected} joint action(s); return one "
                          f"value per joint action")
    for index, number in enumerate(floats):
        if not math.isfinite(number):
            raise RewardError(f"{source}: value {index} is {number}, a non-finite reward; rewards must be finite "
                              f"numbers")
    return floats


class TeamReward:
    """Scores the joint actions of a node with whatever kind of reward the user passed."""

    def __init__(self, reward_func: Any, reward_processor: Callable[[float], float] | None = None) -> None:
        if reward_func is None:
            raise ValueError("reward_func is required: a function returning one team reward per joint action")
        self.reward_func = reward_func
        self.reward_processor = reward_processor
        self.is_term_object = callable(getattr(reward_func, "score", None)) and hasattr(reward_func, "term_names")
        if not self.is_term_object and not callable(reward_func):
            raise ValueError(f"reward_func must be callable or have score(); got {type(reward_func).__name__}")
        self.batched = bool(getattr(reward_func, "batched", False))
        self.name = _name(reward_func.score if self.is_term_object else reward_func)

    @property
    def term_names(self) -> list[str]:
        return list(self.reward_func.term_names) if self.is_term_object else []

    def score(
        self,
        agent_completions: Sequence[Sequence[str]],
        batch_items: Sequence[dict],
        prompts: Sequence[Sequence[str]],
    ) -> tuple[list[float], dict[str, list[float]]]:
        """Rewards for J joint actions. ``agent_completions[i][j]`` is agent i's part of joint action j;
        ``batch_items[j]`` the dataset item; ``prompts[i][j]`` what agent i saw. Returns the processed
        totals and the raw per-term values."""
        num_joint = len(batch_items)
        source = f"reward function {self.name}"
        terms: dict[str, list[float]] = {}
        if self.is_term_object:
            totals, raw_terms = self.reward_func.score(
                [list(c) for c in agent_completions], list(batch_items), [list(p) for p in prompts]
            )
            totals = check_reward_values(totals, num_joint, source)
            for term, values in dict(raw_terms).items():
                terms[str(term)] = check_reward_values(values, num_joint, f"{source}[{term}]")
        elif self.batched:
            totals = check_reward_values(
                call_reward_function(self.reward_func, agent_completions, batch_items=batch_items, prompts=prompts),
                num_joint,
                source,
            )
        else:
            totals = []
            for j in range(num_joint):
                values = call_reward_function(
                    self.reward_func,
                    [[c[j]] for c in agent_completions],
                    batch_items=[batch_items[j]],
                    prompts=[[p[j]] for p in prompts],
                )
                if not values:
                    raise RewardError(f"{source} returned no value")
                totals.append(values[0])
            totals = check_reward_values(totals, num_joint, source)
        if self.reward_processor is not None:
            processed = [float(self.reward_processor(v)) for v in totals]
            totals = check_reward_values(processed, num_joint, f"reward_processor {_name(self.reward_processor)}")
        return totals, terms


class RewardProcessors:
    """CoMLRL-compatible float -> float reward post-processors."""

    @staticmethod
    def scale(factor: float = 1.0) -> Callable[[float], float]:
        """Multiply every reward by ``factor`` (default 1: unchanged, as CoMLRL's)."""
        return lambda reward: reward * factor

    @staticmethod
    def shift(value: float = 0.0) -> Callable[[float], float]:
        """Add ``value`` to every reward (default 0: unchanged, as CoMLRL's)."""
        return lambda reward: reward + value
