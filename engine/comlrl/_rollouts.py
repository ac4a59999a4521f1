"""CoMLRL's ``RolloutSample`` and its actor-critic ``metrics_callback`` convention over CoopLab's
rollout chains.

CoMLRL calls ``metrics_callback(rollouts)`` once per dataset item with that item's samples (every
agent, every turn), keeps the numeric values of the dict it returns and, at evaluation, logs each
key's mean over the items as ``eval/<key>``. CoopLab's actor-critic trainer calls its callback once
per evaluation with every :class:`engine.actor_critic.rollout.Chain`; :func:`comlrl_metrics_callback`
turns that into CoMLRL's calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class RolloutSample:
    """One agent's reply at one turn, as CoMLRL's actor-critic ``metrics_callback`` receives it.

    From CoopLab's rollout: ``old_logprob`` is NaN (CoopLab's rollout records none; its update
    recomputes them), ``returns`` is the critic's target and ``advantage`` the advantage the update
    used; ``metadata`` holds ``turn_idx``, ``generation_idx`` and ``batch_item``."""

    agent_idx: int
    prompt: str
    completion: str
    full_input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_len: int
    response_len: int
    old_logprob: torch.Tensor
    old_value: torch.Tensor
    reward: torch.Tensor
    returns: torch.Tensor
    advantage: torch.Tensor
    normalized_advantage: torch.Tensor | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def _one(value: float) -> torch.Tensor:
    return torch.tensor([float(value)], dtype=torch.float32)


def rollout_samples(chain: Any, generation_idx: int = 0) -> list[RolloutSample]:
    """A CoopLab chain's samples, turn by turn and agent by agent, as :class:`RolloutSample`s."""
    out = []
    for turn in chain.turns:
        for s in turn:
            ids = torch.tensor([*s.prompt_ids, *s.completion_ids], dtype=torch.long)
            out.append(RolloutSample(
                agent_idx=s.agent, prompt=s.prompt, completion=s.text, full_input_ids=ids,
                attention_mask=torch.ones_like(ids), prompt_len=len(s.prompt_ids), response_len=len(s.completion_ids),
                old_logprob=_one(math.nan), old_value=_one(s.old_value), reward=_one(s.reward),
                returns=_one(s.target), advantage=_one(s.advantage),
                metadata={"turn_idx": s.turn, "generation_idx": generation_idx, "batch_item": chain.item}))
    return out


def comlrl_metrics_callback(callback: Callable[[list[RolloutSample]], Any]) -> Callable[[Sequence[Any]], dict]:
    """CoopLab's callback (every chain at once) calling a CoMLRL one per item; each key's mean over the
    items that reported it. Values that are not numbers are dropped, as CoMLRL drops them."""

    def per_item(chains: Sequence[Any]) -> dict[str, float]:
        items: dict[int, list[RolloutSample]] = {}
        generations: dict[int, int] = {}
        for chain in chains:  # an item's chains are its generations
            generation = generations.get(chain.item_index, 0)
            generations[chain.item_index] = generation + 1
            items.setdefault(chain.item_index, []).extend(rollout_samples(chain, generation))
        values: dict[str, list[float]] = {}
        for samples in items.values():
            extra = callback(samples)
            if not isinstance(extra, dict):
                continue
            for key, value in extra.items():
                try:
                    values.setdefault(str(key), []).append(float(value))
                except (TypeError, ValueError):
                    continue
        return {key: sum(v) / len(v) for key, v in values.items() if v}

    per_item.__wrapped__ = callback  # type: ignore[attr-defined]
    return per_item
