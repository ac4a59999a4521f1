"""CoMLRL's reward helpers (``comlrl.utils.reward_utils``): declaring a reward's range, and calling a
reward function with CoMLRL's conventions.

CoopLab's own trainers call rewards through :mod:`engine.rewards.team_reward`, whose ``prompts=`` is
one list per agent; a reward given to an ``engine.comlrl`` trainer is called by
:func:`call_reward_function` below, exactly as CoMLRL calls it (``prompts`` the first agent's prompts).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

RewardCallable = TypeVar("RewardCallable", bound=Callable[..., Any])


def resolve_reward_range(reward_func: Callable[..., Any]) -> tuple[float, float] | None:
    """The ``(minimum, maximum)`` a reward declared with :func:`set_reward_range`, or None."""
    reward_range = getattr(reward_func, "reward_range", None)
    if reward_range is None:
        return None
    if isinstance(reward_range, str | bytes) or not isinstance(reward_range, Sequence) or len(reward_range) != 2:
        raise ValueError("reward_func.reward_range must be a two-item sequence: (minimum, maximum).")
    minimum, maximum = (float(value) for value in reward_range)
    if not math.isfinite(minimum) or not math.isfinite(maximum):
        raise ValueError("reward_func.reward_range values must be finite.")
    if minimum >= maximum:
        raise ValueError("reward_func.reward_range minimum must be less than maximum.")
    return minimum, maximum


def set_reward_range(reward_func: RewardCallable, minimum: float, maximum: float) -> RewardCallable:
    """Declare the raw output range of a reward callable (``reward_func.reward_range``) and return it."""
    reward_func.reward_range = (float(minimum), float(maximum))  # type: ignore[attr-defined]
    resolve_reward_range(reward_func)
    return reward_func


def _floats(raw: Any) -> list[float]:
    if isinstance(raw, torch.Tensor):
        return [float(r) for r in raw.detach().cpu().reshape(-1).tolist()]
    if isinstance(raw, list | tuple):
        return [float(r) for r in raw]
    return [float(raw)]


def _call_with_signature(reward_func: Callable[..., Any], signature: inspect.Signature, prompts: Sequence[str],
                         agent_completions: Sequence[Sequence[str]], num_agents: int,
                         batch_items: Sequence[dict] | None) -> Any:
    params = signature.parameters
    kinds = [p.kind for p in params.values()]
    positional = sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)
    var_args = inspect.Parameter.VAR_POSITIONAL in kinds
    var_kwargs = inspect.Parameter.VAR_KEYWORD in kinds
    kwargs: dict[str, Any] = {}
    args: list[Any]
    if batch_items is not None and ("batch_items" in params or var_kwargs):
        kwargs["batch_items"] = batch_items
    with_prompts = False
    if var_args:
        args = list(agent_completions)
    elif num_agents == 1:
        with_prompts = positional != 1
        args = [prompts, agent_completions[0]] if with_prompts else [agent_completions[0]]
    elif positional == num_agents + 1:
        args, with_prompts = [prompts, *agent_completions], True
    elif positional == 1:
        args = [agent_completions]
    else:
        args = list(agent_completions)
    if not with_prompts and ("prompts" in params or var_kwargs):
        kwargs["prompts"] = prompts
    return reward_func(*args, **kwargs)


def call_reward_function(reward_func: Callable[..., Any], prompts: Sequence[str],
                         agent_completions: Sequence[Sequence[str]], *, num_agents: int,
                         batch_items: Sequence[dict] | None = None,
                         signature: inspect.Signature | None = None) -> list[float]:
    """Call ``reward_func`` as CoMLRL does and return its values as floats.

    With a signature: ``f(*completions)``; for one agent ``f(c)`` or ``f(prompts, c)``; for N agents
    ``f(c1, ..., cN)``, ``f(prompts, c1, ..., cN)`` or ``f(all_agent_lists)``; ``batch_items=`` and
    ``prompts=`` keywords when the function takes them. On a ``TypeError`` it tries
    ``f(*completions)`` once, and re-raises the first error if that fails too. Without a readable
    signature: ``f(*completions, batch_items=...)``, then ``f(*completions)``, then ``f(completions)``.
    """
    if signature is None:
        try:
            signature = inspect.signature(reward_func)
        except (TypeError, ValueError):
            signature = None
    if signature is None:
        if batch_items is not None:
            try:
                return _floats(reward_func(*agent_completions, batch_items=batch_items))
            except TypeError:
                pass
        try:
            return _floats(reward_func(*agent_completions))
        except TypeError:
            return _floats(reward_func(agent_completions))
    try:
        return _floats(_call_with_signature(reward_func, signature, prompts, agent_completions, num_agents,
                                            batch_items))
    except TypeError as exc:
        try:
            return _floats(reward_func(*agent_completions))
        except TypeError:
            raise exc from None


def normalize_reward_lengths(rewards: Sequence[float], *, num_agents: int, num_generations: int,
                             algorithm: str) -> list[float]:
    """A reward function's values for N agents: one (shared by all), one per agent, or one per
    generation; anything else raises."""
    processed = [float(r) for r in rewards]
    if num_agents == 1:
        return processed
    if num_generations < 1:
        raise ValueError("num_generations must be >= 1.")
    if len(processed) == 1:
        return processed * num_agents
    if len(processed) in (num_agents, num_generations):
        return processed
    raise ValueError(f"Reward function must return either 1 or {num_agents} values per prompt for multi-agent "
                     f"{algorithm}.")
