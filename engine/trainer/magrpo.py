"""MAGRPO in one file: a training step from the step's items to every agent's ``optimizer.step()``,
and the trainer that runs it. Read it top to bottom:

    magrpo_step(trainer)                       one step (``train()`` runs it once per step)
      the step's items -> rollout trees -> returns          (engine.trainer.rollout)
      update_team(trainer, rollouts)           also what MAGRPOTrainer.update() runs for a coordinator
        per agent: its batch (S samples) -> the log-probs the loss needs -> advantages (S,)
                   -> the scheduled learning rate -> optimize_agent (AdamW steps on policy_loss)
      credit probes, metrics and episodes                   (engine.trainer.reporting)
    AgentBatch, agent_batch, fill_advantages   the advantages: which samples form a group, their
      batch_advantages, group_advantages       values, and the group baselines (mean, raw, max, rloo)
    score_for_loss, optimize_agent             the loss and the optimiser loop (the samples it reads,
                                               TrainSample, and its settings: engine.trainer.losses)
    MAGRPOTrainer                              the step, ``update()`` and the per-agent map; CoMLRL's
                                               constructor, ``rollout``/``credit``, evaluation:
                                               engine.trainer.team_trainer; presets: engine.trainer.presets

Shapes: N agents; K = ``num_generations`` samples per agent at a node; J joint actions per node (K
``aligned``, K^N ``cross``); S = one agent's samples over every node of every rollout of the step;
B sequences in a micro-batch; T completion tokens (right-padded).

The arithmetic is kept in pure functions with hand-computed tests: the group baselines and
normalisation here (``tests/engine/trainer/test_trainer_advantages.py``), returns in
:mod:`engine.trainer.rollout`, counterfactual values in :mod:`engine.trainer.counterfactual`; token
log-probs, the policy-gradient loss and the learning-rate schedule in :mod:`engine.trainer.losses`.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch

from engine.schema.algorithms import POLICY_GRADIENT_CONFIGS
from engine.sinks.base import Episode
from engine.trainer.agents import (
    AgentRuntime,
    SequenceBatch,
    corrects_sampler,
    map_agents,
    weight_sync_metrics,
)
from engine.trainer.core import step_timing
from engine.trainer.counterfactual import counterfactual_advantages, joint_values
from engine.trainer.losses import (
    NO_GRAD_CHUNK,
    TrainSample,
    UpdateSettings,
    lr_factor,
    pad_rows,
    policy_loss,
    sample_kl,
    tis_weights,
)
from engine.trainer.reporting import (
    agent_metrics,
    branch_episodes,
    choose_branches,
    choose_probes,
    credit_metrics,
    measure_credit,
    probe_count,
    rollout_metrics,
)
from engine.trainer.rollout import Node, Rollout, assign_returns
from engine.trainer.team_trainer import TeamTrainer

ADVANTAGE_EPS = 1e-6  # the floor of a standard deviation that z-scores advantages


# -- the step ------------------------------------------------------------------------------------
def magrpo_step(trainer: MAGRPOTrainer) -> tuple[dict[str, float], list[Episode]]:
    """One training step of ``trainer``: its metrics (``agent/...``, ``train/...``, ``turn_t/...``,
    ``reward/...``, ``perf/...``) and a few sampled episodes for the sink."""
    cfg = trainer.args
    started = time.perf_counter()

    # 1. The step's items: a pure function of the step number (the seeded order, epoch after epoch).
    indices = trainer.items_for_step(trainer.step)

    # 2. Rollout trees, items_per_step items at a time. At every node each agent samples
    #    num_generations completions in one batched call, the team reward scores each joint action
    #    (and, for counterfactual credit, each joint action with one agent's sample replaced), and on
    #    a non-final turn the external transition builds each joint action's child node.
    rollouts = []
    for start in range(0, len(indices), trainer.items_per_step):
        chunk = indices[start:start + trainer.items_per_step]
        rollout = trainer.tree.build([dict(trainer.train_dataset[i]) for i in chunk], chunk)
        # 3. Returns, leaves first: a joint action's reward + discount * the mean return of its child.
        assign_returns(rollout, cfg.discount)
        rollouts.append(rollout)
    updating = time.perf_counter()

    # 4.-5. Per agent: its batch, advantages and optimiser steps (update_team, below).
    metrics = update_team(trainer, rollouts)
    trainer.step += 1
    ended = time.perf_counter()

    # 6. Credit made visible (credit_samples, off by default; never for one agent): on the reported
    #    branches' joint actions and a few more, each agent's team reward less the reward with its
    #    reply left empty (agent/<name>/credit).
    branches = choose_branches(rollouts, cfg.transcripts_per_step, trainer.report_rng)
    probes = choose_probes(rollouts, branches, probe_count(cfg.credit_samples, len(trainer.agents)),
                           trainer.report_rng)
    probe_calls = measure_credit(trainer.tree.reward, probes, len(trainer.agents))
    metrics.update(credit_metrics(probes, trainer.agent_names))

    # 7. Metrics and the reported episodes (root to leaf) for the sink.
    trainer.env_step += sum(r.env_steps for r in rollouts)
    metrics.update(rollout_metrics(rollouts, cfg.num_turns))
    metrics.update(step_timing(started, updating, ended, tokens=sum(r.num_tokens for r in rollouts),
                               generate_s=sum(r.timings["generate_s"] for r in rollouts),
                               reward_s=sum(r.timings["reward_s"] for r in rollouts)))
    metrics.update(weight_sync_metrics(trainer.agents))  # rollout_backend vllm: pushing new weights to the engines
    metrics["perf/credit_reward_calls"] = float(probe_calls + sum(r.credit_reward_calls for r in rollouts))
    metrics["perf/credit_s"] = time.perf_counter() - ended
    metrics["train/epoch"] = trainer.epoch_of_last_step()
    return metrics, branch_episodes(branches, trainer.agent_names)


def update_team(trainer: MAGRPOTrainer, rollouts: Sequence[Rollout]) -> dict[str, float]:
    """Steps 4 and 5 of :func:`magrpo_step` on scored ``rollouts``: per agent its batch, advantages and
    optimiser steps, at the learning rate the schedule gives ``trainer.step``. Returns the
    ``agent/<name>/...`` metrics."""
    cfg, agents = trainer.args, trainer.agents
    # 4. Per agent, its batch: its samples at every node of every tree (S of them), the sibling
    #    groups they form, and their returns marginalised over the partners' samples.
    batches = [agent_batch(agent.index, rollouts) for agent in agents]
    #    The log-probs the loss needs besides the current policy's (rollout policy, reference).
    trainer.map_agents(lambda agent: score_for_loss(agent, batches[agent.index].samples, cfg))
    #    Advantages: the return (less the KL penalty when it is in the reward) against the baseline
    #    (advantage_mode) of its credit_assignment group: the node's siblings, the turn's samples, or
    #    the agent's other samples with partners held fixed; optionally normalised over its samples.
    for batch in batches:
        fill_advantages(batch, rollouts, cfg)

    # 5. Per agent, optimise: the scheduled learning rate, then num_inner_epochs passes of AdamW
    #    steps over mini-batches of nodes (policy_loss on the completion tokens).
    factor = lr_factor(trainer.step, warmup_steps=cfg.warmup_steps, total_steps=trainer.total_steps,
                       schedule=cfg.lr_scheduler)
    set_learning_rates(agents, factor)
    stats = trainer.map_agents(lambda agent: optimize_agent(
        agent, batches[agent.index].samples, trainer.update_settings, trainer.update_rngs[agent.index]))
    return agent_metrics(agents, [batch.kl for batch in batches], stats, factor)


# -- advantages: which samples form a group, the values they are compared on, the group baselines -------
@dataclass
class AgentBatch:
    """One agent's part of an update, flat over every node of every rollout (S samples)."""

    agent: int
    samples: list[TrainSample]  # (S,) the sequences the loss reads
    groups: list[tuple[int, int]]  # sibling groups: samples[start:end] were drawn at one node
    returns: list[float]  # (S,) returns marginalised over partners
    nodes: list[Node] = field(default_factory=list)  # the node of each sibling group
    pools: list[tuple[int, int, int]] = field(default_factory=list)  # each group's (rollout, root node, turn)
    kl: list[float] | None = None  # (S,) k3 KL to the reference model, when it is scored
    values: list[float] = field(default_factory=list)  # (S,) returns, less the KL penalty when in the reward
    advantages: list[float] = field(default_factory=list)  # (S,)


def agent_batch(agent: int, rollouts: Sequence[Rollout]) -> AgentBatch:
    """Agent ``agent``'s samples in rollout/node order with their sibling groups and returns."""
    samples: list[TrainSample] = []
    groups: list[tuple[int, int]] = []
    returns: list[float] = []
    nodes: list[Node] = []
    pools: list[tuple[int, int, int]] = []
    for r_idx, rollout in enumerate(rollouts):
        for node in rollout.nodes:
            s = node.agents[agent]
            groups.append((len(samples), len(samples) + s.num_generations))
            nodes.append(node)
            pools.append((r_idx, root_of(node).node_id, node.turn))
            returns += marginal_returns(node.returns, node.joint_actions, agent, s.num_generations)
            for k in range(s.num_generations):
                sampled = s.sampled_logps[k] if s.sampled_logps is not None else None
                samples.append(TrainSample((r_idx, node.node_id), node.turn, s.prompt_ids[k], s.completion_ids[k],
                                           old_logps=sampled, sampler_logps=sampled))
    return AgentBatch(agent, samples, groups, returns, nodes, pools)


def root_of(node: Node) -> Node:
    """The turn-0 node of ``node``'s tree."""
    while node.parent is not None:
        node = node.parent
    return node


def marginal_returns(returns: Sequence[float], joint_actions: Sequence[Sequence[int]], agent: int,
                     num_generations: int) -> list[float]:
    """Agent ``agent``'s value for each of its K samples: the *mean* return over the joint actions
    that use that sample.

    In aligned mode each sample appears in exactly one joint action, so this is the return itself.
    In cross mode sample k appears in K^(N-1) joint actions (one per combination of partners); the
    mean marginalises the partners out. CoMLRL sums instead, which scales advantages by K^(N-1)
    before normalisation and breaks the raw/max baselines.
    """
    totals = [0.0] * num_generations
    counts = [0] * num_generations
    for value, joint in zip(returns, joint_actions, strict=True):
        totals[joint[agent]] += float(value)
        counts[joint[agent]] += 1
    missing = [k for k, c in enumerate(counts) if c == 0]
    if missing:
        raise ValueError(f"agent {agent}'s samples {missing} appear in no joint action")
    return [t / c for t, c in zip(totals, counts, strict=True)]


def fill_advantages(batch: AgentBatch, rollouts: Sequence[Rollout], config: Any) -> None:
    """An agent's advantages from its scored batch: the KL to the reference when it is measured, each
    sample's value (less the KL penalty when it is in the reward) and the group-relative advantages,
    set on the samples the loss reads and recorded on the tree (:func:`record_on_tree`)."""
    in_reward = config.reference_kl_enabled and config.reference_kl_mode == "reward"
    kl_coef = config.reference_kl_coef if in_reward else 0.0
    batch.kl = sample_kl(batch.samples) if config.reference_kl_enabled else None  # (S,)
    batch.values = sample_values(batch.returns, batch.kl, kl_coef)  # (S,)
    estimator = config.credit_assignment if isinstance(config, POLICY_GRADIENT_CONFIGS) else "group"
    settings = {"mode": config.advantage_mode, "normalize": config.advantage_normalization,
                "per_agent_normalization": config.per_agent_normalization}
    if estimator == "counterfactual":
        batch.advantages = counterfactual_batch_advantages(batch, kl_coef, **settings)  # (S,)
    else:
        pools = batch.pools if estimator == "turn_group" else None
        batch.advantages = batch_advantages(batch.values, batch.groups, pools=pools, **settings)  # (S,)
    for sample, advantage in zip(batch.samples, batch.advantages, strict=True):
        sample.advantage = float(advantage)
    record_on_tree(batch, rollouts)  # the transcripts show each sample's advantage and KL


def counterfactual_batch_advantages(batch: AgentBatch, kl_coef: float, *, mode: str, normalize: bool,
                                    per_agent_normalization: bool) -> list[float]:
    """Counterfactual advantages of one agent's samples, node by node
    (:func:`engine.trainer.counterfactual.counterfactual_advantages`), z-scored within each node's
    siblings with ``normalize`` and over the agent's samples with ``per_agent_normalization``."""
    advantages: list[float] = []
    for node, (start, end) in zip(batch.nodes, batch.groups, strict=True):
        if not node.counterfactual_rewards and len(node.joint_actions) < (end - start) ** len(node.agents):
            raise ValueError("credit_assignment='counterfactual' needs the team reward of each agent's replaced "
                             "samples, scored while the tree grows; a rollout credited from outside "
                             "(credit()) has none. Use credit_assignment='group' with a coordinator's rewards")
        values = joint_values(node.joint_actions, node.returns, node.rewards, node.counterfactual_rewards)
        penalties = [kl_coef * d for d in batch.kl[start:end]] if kl_coef and batch.kl is not None else None
        node_adv = counterfactual_advantages(values, node.joint_actions, batch.agent, end - start, mode, penalties)
        if normalize and len(node_adv) > 1:
            node_adv = normalize_batch(torch.tensor(node_adv, dtype=torch.float64)).tolist()
        advantages += node_adv
    return per_agent_normalized(advantages, per_agent_normalization)


def record_on_tree(batch: AgentBatch, rollouts: Sequence[Rollout]) -> None:
    """Write each sample's value, advantage and KL back onto its node (transcripts show them)."""
    nodes = [node for rollout in rollouts for node in rollout.nodes]
    for node, (start, end) in zip(nodes, batch.groups, strict=True):
        s = node.agents[batch.agent]
        s.values = batch.values[start:end]
        s.advantages = batch.advantages[start:end]
        if batch.kl is not None:
            s.ref_kl = batch.kl[start:end]


def sample_values(returns: Sequence[float], kl: Sequence[float] | None, kl_in_reward_coef: float) -> list[float]:
    """Each sample's value: its return, less ``kl_in_reward_coef * kl`` when the KL is in the reward."""
    if not kl_in_reward_coef or kl is None:
        return list(returns)
    return [v - kl_in_reward_coef * d for v, d in zip(returns, kl, strict=True)]


def batch_advantages(values: Sequence[float], groups: Sequence[tuple[int, int]], *, mode: str, normalize: bool,
                     per_agent_normalization: bool, pools: Sequence[Hashable] | None = None) -> list[float]:
    """Group-relative advantages of one agent's samples (pure function): the baseline is taken among
    the siblings of each group ``groups[g] = (start, end)``, or, with ``pools``, among every sample
    of the groups that share a pool key (``turn_group``); with ``per_agent_normalization`` the
    agent's advantages are z-scored once more over all its samples, so agents whose returns live on
    different scales get comparable steps."""
    members = pooled_groups(groups, pools) if pools is not None else [list(range(a, b)) for a, b in groups]
    advantages = [0.0] * len(values)
    for group in members:
        group_values = torch.tensor([float(values[i]) for i in group])
        for i, a in zip(group, group_advantages(group_values, mode, normalize).tolist(), strict=True):
            advantages[i] = a
    return per_agent_normalized(advantages, per_agent_normalization)


def pooled_groups(groups: Sequence[tuple[int, int]], keys: Sequence[Hashable]) -> list[list[int]]:
    """Sample indices of the groups that share a key, merged, in first-seen order: ``groups[g]`` is a
    node's sibling range ``[start, end)`` and ``keys[g]`` its pool (``turn_group``: the item's tree
    and the turn, so an agent's samples at every node of one turn of one item form one group)."""
    if len(groups) != len(keys):
        raise ValueError(f"{len(groups)} groups but {len(keys)} keys")
    pools: dict[Hashable, list[int]] = {}
    for (start, end), key in zip(groups, keys, strict=True):
        pools.setdefault(key, []).extend(range(start, end))
    return list(pools.values())


def group_advantages(values: torch.Tensor, mode: str, normalize: bool) -> torch.Tensor:
    """Advantages of one sibling group (1-D tensor of returns, one per sample).

    * ``mean``: ``R - mean(R)`` (MAGRPO)
    * ``raw``: ``R`` (REINFORCE, no baseline)
    * ``max``: ``R - max(R)`` (ReMax)
    * ``rloo``: ``R - mean(others) = (K R - sum R) / (K - 1)`` (leave-one-out)

    With ``normalize`` (and more than one sample) the result is z-scored with the population
    standard deviation, floored at 1e-6 so a group of equal values gives zeros, not NaN.
    """
    if values.dim() != 1:
        raise ValueError(f"expected a 1-D group of returns, got shape {tuple(values.shape)}")
    values = values.to(torch.float64)
    k = values.numel()
    if mode == "mean":
        adv = values - values.mean()
    elif mode == "raw":
        adv = values.clone()
    elif mode == "max":
        adv = values - values.max()
    elif mode == "rloo":
        if k < 2:
            raise ValueError("rloo needs at least 2 samples per group")
        adv = (k * values - values.sum()) / (k - 1)
    else:
        raise ValueError(f"advantage_mode must be one of mean, raw, max, rloo; got {mode!r}")
    if normalize and k > 1:
        adv = (adv - adv.mean()) / adv.std(unbiased=False).clamp_min(ADVANTAGE_EPS)
    return adv


def per_agent_normalized(advantages: list[float], per_agent_normalization: bool) -> list[float]:
    """``advantages`` z-scored once more over all of one agent's samples when ``per_agent_normalization``
    is set (agents whose returns live on different scales get comparable steps), else as they are."""
    if per_agent_normalization:
        return normalize_batch(torch.tensor(advantages, dtype=torch.float64)).tolist()
    return advantages


def normalize_batch(advantages: torch.Tensor) -> torch.Tensor:
    """z-score a whole batch (used for per-agent normalisation across all of an agent's nodes)."""
    if advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / advantages.std(unbiased=False).clamp_min(ADVANTAGE_EPS)


# -- the loss and the optimiser loop --------------------------------------------------------------

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


def _to_device(batch: SequenceBatch, device: torch.device) -> SequenceBatch:
    """The batch on another device (the reference model's): every tensor, shared prompts included."""
    def move(obj):
        return replace(obj, **{f.name: getattr(obj, f.name).to(device) for f in fields(obj)
                               if isinstance(getattr(obj, f.name), torch.Tensor)})

    return replace(move(batch), prefix=None if batch.prefix is None else move(batch.prefix))


def score_for_loss(agent: AgentRuntime, samples: list[TrainSample], config: Any) -> None:
    """The log-probs the loss needs besides the current policy's: the rollout policy's (the sampler
    keeps them; scored only when missing) and the reference model's. An agent sampling from a
    ``rollout_dtype`` copy has its log-probs scored again by its own weights for the KL, which must
    be zero where the trained policy equals the reference, and for the clipped ratio when its tokens
    are importance-weighted (the ratio is then the trained policy's against itself at rollout time,
    and the sampler's difference is the weight's)."""
    missing = any(s.old_logps is None for s in samples)
    tis = isinstance(config, POLICY_GRADIENT_CONFIGS) and corrects_sampler(agent, config.rollout_correction)
    rescore = agent.rollout_copy is not None and (
        config.reference_kl_enabled or (tis and config.clip_epsilon is not None))
    if ((config.clip_epsilon is not None or config.reference_kl_enabled) and missing) or rescore:
        score_logprobs(agent, samples, reference=False)
    if config.reference_kl_enabled:
        score_logprobs(agent, samples, reference=True)


def set_learning_rates(agents: Sequence[AgentRuntime], factor: float) -> None:
    """Every agent's learning rate times the schedule's ``factor`` (:func:`engine.trainer.losses.lr_factor`)."""
    for agent in agents:
        assert agent.optimizer is not None  # every trained agent has one (engine.trainer.setup.load_agents)
        for group in agent.optimizer.param_groups:
            group["lr"] = agent.learning_rate * factor


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
    assert optimizer is not None  # every trained agent has one (engine.trainer.setup.load_agents)
    params = agent.trainable_parameters()
    loss_sum, loss_count, entropy_sum, entropy_count = 0.0, 0, 0.0, 0
    grad_norms: list[float] = []
    clip_fracs: list[float] = []
    kl_losses: list[float] = []
    kl_as_loss = settings.reference_kl_enabled and settings.reference_kl_mode == "loss"
    tis = corrects_sampler(agent, settings.rollout_correction) and all(s.sampler_logps is not None for s in samples)
    correction: dict[str, list[float]] = {"sampler_kl": [], "tis_clipped": []}
    agent.model.train()
    for epoch in range(settings.num_inner_epochs):
        for batch in minibatches(samples, settings.train_batch_size, rng):  # train_batch_size nodes of one turn
            optimizer.zero_grad(set_to_none=True)  # one AdamW step per mini-batch, its micro-batches accumulated
            micro = settings.micro_batch_size or len(batch)
            batch_loss = 0.0
            for start in range(0, len(batch), micro):
                chunk = batch[start:start + micro]  # B sequences
                packed = agent.pack([s.prompt_ids for s in chunk], [s.completion_ids for s in chunk])
                logps, entropy = agent.forward_logprobs(packed, with_entropy=epoch == 0)  # (B, T) each
                width = logps.shape[1]
                adv = torch.tensor([s.advantage for s in chunk], dtype=torch.float32, device=logps.device)  # (B,)
                old = pad_rows([s.old_logps for s in chunk], width, logps.device) \
                    if settings.clip_epsilon is not None else None  # (B, T) the rollout policy's
                ref = pad_rows([s.ref_logps for s in chunk], width, logps.device) if kl_as_loss else None  # (B, T)
                weights = None
                if tis:  # the trained policy at rollout time: the rescored old log-probs, or the first pass's
                    sampler = pad_rows([s.sampler_logps for s in chunk], width, logps.device)
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
            norm = float(torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm or float("inf")))
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


# -- the trainer -------------------------------------------------------------------------------------
def credit_note(credit_samples: int, num_agents: int) -> str | None:
    """The start-up line of a run that asked for credit probes (None when it did not): what they cost."""
    if credit_samples <= 0:
        return None
    if num_agents < 2:
        return (f"credit probes: off for a team of one agent (credit_samples {credit_samples} is ignored: there is "
                "no partner to credit)")
    return (f"credit probes: on (credit_samples {credit_samples}): up to {credit_samples} joint actions per step are "
            f"scored again once per agent with its reply left empty, up to {credit_samples * num_agents} extra "
            "reward calls per step (perf/credit_reward_calls, perf/credit_s); credit_samples 0 turns them off")


class MAGRPOTrainer(TeamTrainer):
    """Cooperative multi-agent GRPO (and its baseline variants) over a rollout tree.

    Constructed as CoMLRL's trainer is (:class:`engine.trainer.team_trainer.TeamTrainer` lists the
    arguments and holds ``rollout()``, ``credit()``, evaluation and ``close()``); here are the step,
    ``update()`` (the step's update on a coordinator's rollouts) and the per-agent map both run on.
    The presets MAREINFORCE, MAReMax and MARLOO are in :mod:`engine.trainer.presets`.
    """

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """One training step (:func:`magrpo_step`): metrics and episodes."""
        return magrpo_step(self)

    def start_notes(self) -> list[str]:
        """How each agent samples, and what the credit probes cost when ``credit_samples`` asks for them."""
        probes = credit_note(self.args.credit_samples, len(self.agents))
        return [*super().start_notes(), *([probes] if probes else [])]

    def map_agents(self, fn: Callable[[AgentRuntime], Any]) -> list[Any]:
        """``fn(agent)`` for every agent, in order; in the agents' threads when they have them."""
        return map_agents(fn, self.agents, self._pool)

    def update(self, rollouts: Sequence[Rollout], *, advance_step: bool = False) -> dict[str, float]:
        """Steps 4 and 5 of :func:`magrpo_step` on scored ``rollouts`` (:func:`update_team`, the code the
        step runs): per agent its batch, advantages and optimiser steps. Returns the
        ``agent/<name>/...`` metrics.

        The learning rate follows the schedule at ``self.step`` over ``self.total_steps`` (a
        coordinator may set ``total_steps`` to the number of updates it will make);
        ``advance_step`` counts this update in ``self.step``, as a training step does.
        """
        if any(not node.returns for rollout in rollouts for node in rollout.nodes):
            raise ValueError("update() needs scored rollouts: a rollout(..., score=False) gets its rewards "
                             "from credit(rollout, rewards) first")
        metrics = update_team(self, rollouts)
        if advance_step:
            self.step += 1
        return metrics
