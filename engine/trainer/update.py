"""The policy update of one agent from scored rollouts.

Per agent: collect its samples (one per completion at every node), optionally compute the rollout
policy's and the reference model's log-probs (no grad), then for each inner epoch walk the nodes
turn by turn in shuffled mini-batches of ``train_batch_size`` nodes; each mini-batch is one AdamW
step made of padded forwards over micro-batches of sequences.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from engine.trainer.agents import AgentRuntime, SequenceBatch
from engine.trainer.losses import k3_kl, policy_loss, tis_weights

NO_GRAD_CHUNK = 64  # sequences per no-grad forward when scoring old/reference log-probs


@dataclass
class UpdateSettings:
    """The parts of the config that shape an update."""

    loss_type: str
    clip_epsilon: float | None
    num_inner_epochs: int
    train_batch_size: int
    micro_batch_size: int | None
    max_grad_norm: float | None
    reference_kl_enabled: bool
    reference_kl_mode: str
    reference_kl_coef: float
    rollout_correction: str = "none"  # auto | tis | none (see corrects_sampler)
    tis_cap: float = 2.0


@dataclass
class TrainSample:
    """One completion of one agent, ready for the loss."""

    node_key: tuple[int, int]  # (rollout index, node id)
    turn: int
    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float = 0.0
    old_logps: torch.Tensor | None = None  # (T,) rollout policy
    sampler_logps: torch.Tensor | None = None  # (T,) the sampler's own, kept for the rollout correction
    ref_logps: torch.Tensor | None = None  # (T,) reference model


@torch.no_grad()
def score_logprobs(agent: AgentRuntime, samples: list[TrainSample], *, reference: bool) -> None:
    """Fill ``old_logps`` (current policy) or ``ref_logps`` (reference model) without gradients."""
    model = agent.reference_model if reference else agent.model
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(samples), NO_GRAD_CHUNK):
            chunk = samples[start:start + NO_GRAD_CHUNK]
            batch = agent.pack([s.prompt_ids for s in chunk], [s.completion_ids for s in chunk])
            if reference:
                batch = _to_device(batch, next(model.parameters()).device)
            logps, _ = agent.forward_logprobs(batch, model=model)
            logps = logps.float().cpu()
            for row, s in enumerate(chunk):
                value = logps[row, :len(s.completion_ids)].clone()
                if reference:
                    s.ref_logps = value
                else:
                    s.old_logps = value
    finally:
        model.train(was_training)


def corrects_sampler(agent: AgentRuntime, rollout_correction: str) -> bool:
    """Whether ``agent``'s update weights its tokens by truncated importance sampling: ``tis`` always
    (where the sampler kept its log-probs), ``auto`` when the agent samples from a copy in another
    dtype than the weights it trains (``rollout_dtype``), ``none`` never."""
    if rollout_correction == "tis":
        return True
    if rollout_correction != "auto" or agent.rollout_copy is None:
        return False
    trained = next((p.dtype for p in agent.model.parameters() if p.is_floating_point()), None)
    return agent.rollout_copy.dtype != trained


def score_for_loss(agent: AgentRuntime, samples: list[TrainSample], config: Any) -> None:
    """The log-probs the loss needs besides the current policy's: the rollout policy's (the sampler
    keeps them; scored only when missing) and the reference model's. An agent sampling from a
    ``rollout_dtype`` copy has its log-probs scored again by its own weights for the KL, which must
    be zero where the trained policy equals the reference, and for the clipped ratio when its tokens
    are importance-weighted (the ratio is then the trained policy's against itself at rollout time,
    and the sampler's difference is the weight's)."""
    missing = any(s.old_logps is None for s in samples)
    tis = corrects_sampler(agent, getattr(config, "rollout_correction", "none"))
    rescore = agent.rollout_copy is not None and (
        config.reference_kl_enabled or (tis and config.clip_epsilon is not None))
    if ((config.clip_epsilon is not None or config.reference_kl_enabled) and missing) or rescore:
        score_logprobs(agent, samples, reference=False)
    if config.reference_kl_enabled:
        score_logprobs(agent, samples, reference=True)


def set_learning_rates(agents: Sequence[AgentRuntime], factor: float) -> None:
    """Every agent's learning rate times the schedule's ``factor`` (:func:`engine.trainer.losses.lr_factor`)."""
    for agent in agents:
        for group in agent.optimizer.param_groups:
            group["lr"] = agent.learning_rate * factor


def _to_device(batch: SequenceBatch, device: torch.device) -> SequenceBatch:
    """The batch on another device (the reference model's): every tensor, shared prompts included."""
    def move(obj):
        return replace(obj, **{f.name: getattr(obj, f.name).to(device) for f in fields(obj)
                               if isinstance(getattr(obj, f.name), torch.Tensor)})

    return replace(move(batch), prefix=None if batch.prefix is None else move(batch.prefix))


def sample_kl(samples: Sequence[TrainSample]) -> list[float]:
    """Sum of the per-token k3 KL of each sample (CoMLRL's KL-in-reward quantity)."""
    return [float(k3_kl(s.old_logps, s.ref_logps).sum()) for s in samples]


def _pad_rows(rows: list[torch.Tensor], width: int, device: torch.device) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, :r.numel()] = r
    return out.to(device)


def minibatches(samples: list[TrainSample], batch_nodes: int, rng: random.Random) -> list[list[TrainSample]]:
    """Group samples by node, nodes by turn; shuffle nodes within each turn; chunk into mini-batches
    of ``batch_nodes`` nodes that never mix turns (as CoMLRL's buffer update does)."""
    by_node: dict[tuple[int, int], list[TrainSample]] = {}
    for s in samples:
        by_node.setdefault(s.node_key, []).append(s)
    turns: dict[int, list[tuple[int, int]]] = {}
    for key, group in by_node.items():
        turns.setdefault(group[0].turn, []).append(key)
    batches = []
    for turn in sorted(turns):
        keys = turns[turn]
        rng.shuffle(keys)
        for start in range(0, len(keys), batch_nodes):
            batches.append([s for key in keys[start:start + batch_nodes] for s in by_node[key]])
    return batches


def optimize_agent(agent: AgentRuntime, samples: list[TrainSample], settings: UpdateSettings,
                   rng: random.Random) -> dict[str, float]:
    """Run the inner epochs of mini-batch steps for one agent. Returns its training statistics."""
    optimizer = agent.optimizer
    params = agent.trainable_parameters()
    loss_sum, loss_count, grad_norms, entropy_sum, entropy_count, clip_fracs, kl_losses = 0.0, 0, [], 0.0, 0, [], []
    kl_as_loss = settings.reference_kl_enabled and settings.reference_kl_mode == "loss"
    tis = corrects_sampler(agent, settings.rollout_correction) and all(s.sampler_logps is not None for s in samples)
    correction: dict[str, list[float]] = {"sampler_kl": [], "tis_clipped": []}
    agent.model.train()
    for epoch in range(settings.num_inner_epochs):
        for batch in minibatches(samples, settings.train_batch_size, rng):
            optimizer.zero_grad(set_to_none=True)
            micro = settings.micro_batch_size or len(batch)
            batch_loss = 0.0
            for start in range(0, len(batch), micro):
                chunk = batch[start:start + micro]
                packed = agent.pack([s.prompt_ids for s in chunk], [s.completion_ids for s in chunk])
                logps, entropy = agent.forward_logprobs(packed, with_entropy=epoch == 0)
                width = logps.shape[1]
                adv = torch.tensor([s.advantage for s in chunk], dtype=torch.float32, device=logps.device)
                old = _pad_rows([s.old_logps for s in chunk], width, logps.device) \
                    if settings.clip_epsilon is not None else None
                ref = _pad_rows([s.ref_logps for s in chunk], width, logps.device) if kl_as_loss else None
                weights = None
                if tis:  # the trained policy at rollout time: the rescored old log-probs, or the first pass's
                    sampler = _pad_rows([s.sampler_logps for s in chunk], width, logps.device)
                    weights, tis_stats = tis_weights(old if old is not None else logps.detach(), sampler,
                                                     packed.completion_mask, settings.tis_cap)
                    if epoch == 0:
                        for key, value in tis_stats.items():
                            correction[key].append(value)
                loss, stats = policy_loss(
                    logps, packed.completion_mask, adv, loss_type=settings.loss_type, old_logps=old,
                    clip_epsilon=settings.clip_epsilon, ref_logps=ref,
                    kl_coef=settings.reference_kl_coef if kl_as_loss else 0.0, token_weights=weights,
                )
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"agent {agent.name!r}: the loss is {float(loss.detach())} (non-finite); check the rewards' scale, "
                        f"lower agent_learning_rate or set max_grad_norm"
                    )
                (loss * (len(chunk) / len(batch))).backward()
                batch_loss += float(loss.detach()) * len(chunk) / len(batch)
                if entropy is not None:
                    m = packed.completion_mask.bool()
                    entropy_sum += float(entropy[m].sum())
                    entropy_count += int(m.sum())
                if "clip_fraction" in stats:
                    clip_fracs.append(stats["clip_fraction"])
                if "kl_loss" in stats:
                    kl_losses.append(stats["kl_loss"])
            norm = torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm or float("inf"))
            norm = float(norm)
            if not math.isfinite(norm):
                raise FloatingPointError(f"agent {agent.name!r}: the gradient norm is {norm} (non-finite)")
            optimizer.step()
            grad_norms.append(norm)
            loss_sum += batch_loss
            loss_count += 1
    optimizer.zero_grad(set_to_none=True)
    stats_out = {
        "loss": loss_sum / max(loss_count, 1),
        "grad_norm": sum(grad_norms) / max(len(grad_norms), 1),
        "entropy": entropy_sum / max(entropy_count, 1),
        "response_len": sum(len(s.completion_ids) for s in samples) / max(len(samples), 1),
        "optimizer_steps": float(loss_count),
    }
    if clip_fracs:
        stats_out["clip_fraction"] = sum(clip_fracs) / len(clip_fracs)
    if kl_losses:
        stats_out["kl_loss"] = sum(kl_losses) / len(kl_losses)
    for key, values in correction.items():
        if values:
            stats_out[key] = sum(values) / len(values)
    return stats_out
