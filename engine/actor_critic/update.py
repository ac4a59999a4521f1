"""Actor and critic updates of the actor-critic trainers.

Actors: the policy-gradient loss of :func:`engine.trainer.losses.policy_loss` with the critic's
advantage, over shuffled mini-batches that never mix turns; with a value head on the actor's own
backbone the clipped value loss is added (``value_loss_coef``) and one optimizer steps both.
Critics: the clipped value loss of :mod:`engine.actor_critic.targets` on text the critic reads.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from engine.actor_critic.critics import ValueHead, head_values
from engine.actor_critic.rollout import TurnSample
from engine.actor_critic.targets import explained_variance, value_loss
from engine.trainer.agents import AgentRuntime, SequenceBatch
from engine.trainer.losses import head_logprobs, policy_loss, token_logprobs


@dataclass
class StepSettings:
    """The config parts an update needs."""

    train_batch_size: int
    loss_type: str
    max_grad_norm: float | None
    value_clip_range: float | None
    value_loss_coef: float
    critic_type: str


def turn_batches(samples: Sequence[Any], batch_size: int, rng: random.Random,
                 turn_of: Callable[[Any], int]) -> list[list[Any]]:
    """Shuffle samples within each turn and chunk them into mini-batches that never mix turns."""
    turns: dict[int, list[Any]] = {}
    for s in samples:
        turns.setdefault(turn_of(s), []).append(s)
    batches: list[list[Any]] = []
    for turn in sorted(turns):
        group = list(turns[turn])
        rng.shuffle(group)
        batches.extend(group[i:i + batch_size] for i in range(0, len(group), batch_size))
    return batches


def clip_and_step(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter], max_norm: float | None,
                  who: str) -> float:
    """Clip the gradient norm, refuse a non-finite one, take the optimizer step. Returns the norm."""
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm or float("inf")))
    if not math.isfinite(norm):
        raise FloatingPointError(f"{who}: the gradient norm is {norm} (non-finite); lower the learning rate")
    optimizer.step()
    return norm


def value_positions(batch: SequenceBatch, completion_lengths: Sequence[int], critic_type: str) -> torch.Tensor:
    """Column of the token whose hidden state the head reads: last prompt token (V) or last reply token (Q)."""
    lp = batch.input_ids.shape[1] - batch.completion_ids.shape[1]
    if critic_type == "v":
        return torch.full((len(completion_lengths),), lp - 1, dtype=torch.long)
    return torch.tensor([lp - 1 + n for n in completion_lengths], dtype=torch.long)


def actor_forward(agent: AgentRuntime, batch: SequenceBatch, head: ValueHead | None,
                  positions: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Completion log-probs ``(B, T)`` and, with a value head on this backbone, its values ``(B,)``."""
    if head is None:
        logps, _ = agent.forward_logprobs(batch)
        return logps, None
    if positions is None:
        raise ValueError("actor_forward: a value head reads the hidden state at positions (value_positions); got none")
    t = batch.completion_ids.shape[1]
    plan = agent.logits_plan(agent.model, batch)
    if plan is not None:  # logits over the budget: from the final hidden states, a chunk at a time
        hidden = agent.model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                        position_ids=batch.position_ids, use_cache=False).last_hidden_state
        logps, _ = head_logprobs(hidden[:, -(t + 1):-1], plan[0], batch.completion_ids, rows=plan[1])
        return logps, head_values(hidden, head, positions)
    out = agent.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                      position_ids=batch.position_ids, use_cache=False, output_hidden_states=True)
    logits = out.logits[:, -(t + 1):-1, :]
    return token_logprobs(logits, batch.completion_ids), head_values(out.hidden_states[-1], head, positions)


@torch.no_grad()
def head_old_values(agent: AgentRuntime, head: ValueHead, samples: Sequence[TurnSample], critic_type: str,
                    chunk: int = 64) -> None:
    """Fill ``old_value`` of an agent's samples from the value head on its own backbone."""
    was = agent.model.training
    agent.model.eval()
    try:
        for start in range(0, len(samples), chunk):
            part = samples[start:start + chunk]
            batch = agent.pack([s.prompt_ids for s in part], [s.completion_ids for s in part])
            positions = value_positions(batch, [len(s.completion_ids) for s in part], critic_type)
            _, values = actor_forward(agent, batch, head, positions)
            assert values is not None  # a head was given: actor_forward returns its values
            for s, v in zip(part, values.tolist(), strict=True):
                s.old_value = float(v)
    finally:
        agent.model.train(was)


def update_actor(agent: AgentRuntime, samples: Sequence[TurnSample], settings: StepSettings, rng: random.Random,
                 head: ValueHead | None = None) -> dict[str, float]:
    """One pass of mini-batch steps over the agent's samples. Returns its ``agent/`` (and head) stats."""
    optimizer = agent.optimizer
    assert optimizer is not None  # every trained agent has one (engine.trainer.setup.load_agents)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    losses, vlosses, norms = [], [], []
    agent.model.train()
    for batch_samples in turn_batches(samples, settings.train_batch_size, rng, lambda s: s.turn):
        optimizer.zero_grad(set_to_none=True)
        batch = agent.pack([s.prompt_ids for s in batch_samples], [s.completion_ids for s in batch_samples])
        positions = value_positions(batch, [len(s.completion_ids) for s in batch_samples], settings.critic_type) \
            if head is not None else None
        logps, values = actor_forward(agent, batch, head, positions)
        adv = torch.tensor([s.advantage for s in batch_samples], dtype=torch.float32, device=logps.device)
        loss, _ = policy_loss(logps, batch.completion_mask, adv, loss_type=settings.loss_type)
        losses.append(float(loss.detach()))
        if values is not None:
            old = torch.tensor([s.old_value for s in batch_samples], dtype=torch.float32, device=values.device)
            target = torch.tensor([s.target for s in batch_samples], dtype=torch.float32, device=values.device)
            vloss = value_loss(values, old, target, settings.value_clip_range)
            vlosses.append(float(vloss.detach()))
            loss = loss + settings.value_loss_coef * vloss
        if not torch.isfinite(loss):
            raise FloatingPointError(f"agent {agent.name!r}: the loss is {float(loss.detach())} (non-finite); "
                                     f"check the rewards' scale or lower agent_learning_rate")
        loss.backward()
        norms.append(clip_and_step(optimizer, params, settings.max_grad_norm, f"agent {agent.name!r}"))
    optimizer.zero_grad(set_to_none=True)
    stats = {
        "loss": _mean(losses),
        "grad_norm": _mean(norms),
        "response_len": _mean([len(s.completion_ids) for s in samples]),
        "reward_mean": _mean([s.reward for s in samples]),
        "advantage_mean": _mean([s.advantage for s in samples]),
        "optimizer_steps": float(len(norms)),
    }
    if vlosses:
        stats["value_loss"] = _mean(vlosses)
    return stats


def update_critic(critic: torch.nn.Module, optimizer: torch.optim.Optimizer, rows: Sequence[Any],
                  texts: Callable[[Any], str], old: Callable[[Any], list[float]], target: Callable[[Any], list[float]],
                  turn_of: Callable[[Any], int], settings: StepSettings, rng: random.Random, who: str) -> dict[str, float]:
    """One pass of mini-batch steps of a critic over ``rows`` (one row = one critic input).

    ``old(row)``/``target(row)`` give the rollout-time values and targets of the row's outputs.
    """
    params = [p for p in critic.parameters() if p.requires_grad]
    losses, norms = [], []
    critic.train()
    for batch_rows in turn_batches(rows, settings.train_batch_size, rng, turn_of):
        optimizer.zero_grad(set_to_none=True)
        values = critic([texts(r) for r in batch_rows])
        old_t = torch.tensor([old(r) for r in batch_rows], dtype=torch.float32, device=values.device)
        target_t = torch.tensor([target(r) for r in batch_rows], dtype=torch.float32, device=values.device)
        loss = value_loss(values, old_t, target_t, settings.value_clip_range)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"{who}: the value loss is {float(loss.detach())} (non-finite)")
        loss.backward()
        losses.append(float(loss.detach()))
        norms.append(clip_and_step(optimizer, params, settings.max_grad_norm, who))
    optimizer.zero_grad(set_to_none=True)
    return {"value_loss": _mean(losses), "grad_norm": _mean(norms), "optimizer_steps": float(len(norms)),
            "samples": float(len(rows))}


def critic_stats(old_values: Sequence[float], targets: Sequence[float]) -> dict[str, float]:
    """What a critic's rollout-time estimates say about its fit: explained variance and means."""
    return {
        "explained_variance": explained_variance(old_values, targets),
        "value_mean": _mean(old_values),
        "target_mean": _mean(targets),
    }


def _mean(values: Sequence[float]) -> float:
    values = list(values)
    return float(sum(values) / len(values)) if values else 0.0
