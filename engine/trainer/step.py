"""One MAGRPO training step, top to bottom (:func:`magrpo_step`; ``MAGRPOTrainer.train_step`` runs it):

    the step's items  ->  rollout trees  ->  returns  ->  per agent: batch, advantages, optimise
      ->  credit measured (when asked)  ->  metrics and episodes

Each stage is a named helper, hand-tested on its own: the tree (:mod:`engine.trainer.rollout`),
returns and advantages (:mod:`engine.trainer.credit`, pure arithmetic in
:mod:`engine.trainer.advantages` and :mod:`engine.trainer.counterfactual`), each agent's measured
credit (:mod:`engine.trainer.credit_probe`), the loss and the optimiser (:mod:`engine.trainer.update`,
:mod:`engine.trainer.losses`) and the reports (:mod:`engine.trainer.reporting`). A coordinator of
several trainers runs the same helpers in two calls, ``rollout`` and ``update``
(:class:`engine.trainer.trainer.MAGRPOTrainer`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from engine.schema.configs import MAGRPOConfig
from engine.sinks.base import Episode
from engine.trainer.agents import AgentRuntime, weight_sync_metrics
from engine.trainer.core import step_timing
from engine.trainer.credit import agent_batch, assign_returns, fill_advantages
from engine.trainer.credit_probe import choose_probes, credit_metrics, measure_credit, probe_count
from engine.trainer.losses import lr_factor
from engine.trainer.reporting import agent_metrics, branch_episodes, choose_branches, rollout_metrics
from engine.trainer.rollout import TreeBuilder
from engine.trainer.update import UpdateSettings, optimize_agent, score_for_loss, set_learning_rates


class Stepped(Protocol):
    """What a step reads and advances of a trainer (:class:`engine.trainer.MAGRPOTrainer`)."""

    args: MAGRPOConfig
    agents: list[AgentRuntime]
    agent_names: list[str]
    train_dataset: Any
    tree: TreeBuilder
    update_settings: UpdateSettings
    items_per_step: int
    step: int
    total_steps: int
    env_step: int
    update_rngs: list[random.Random]  # one per agent: the order of its mini-batches
    report_rng: random.Random  # which episodes are reported

    def items_for_step(self, step: int) -> list[int]: ...

    def map_agents(self, fn: Callable[[AgentRuntime], Any]) -> list[Any]: ...

    def epoch_of_last_step(self) -> int: ...


def magrpo_step(trainer: Stepped) -> tuple[dict[str, float], list[Episode]]:
    """One training step of ``trainer``: its metrics (``agent/...``, ``train/...``, ``turn_t/...``,
    ``reward/...``, ``perf/...``) and a few sampled episodes for the sink."""
    cfg, agents = trainer.args, trainer.agents
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
    trainer.step += 1
    metrics = agent_metrics(agents, batches, stats, factor)
    ended = time.perf_counter()

    # 6. Credit made visible (credit_samples, off by default; never for one agent): on the reported
    #    branches' joint actions and a few more, each agent's team reward less the reward with its
    #    reply left empty (agent/<name>/credit).
    branches = choose_branches(rollouts, cfg.transcripts_per_step, trainer.report_rng)
    probes = choose_probes(rollouts, branches, probe_count(cfg.credit_samples, len(agents)), trainer.report_rng)
    probe_calls = measure_credit(trainer.tree.reward, probes, len(agents))
    metrics.update(credit_metrics(probes, trainer.agent_names))

    # 7. Metrics and the reported episodes (root to leaf) for the sink.
    trainer.env_step += sum(r.env_steps for r in rollouts)
    metrics.update(rollout_metrics(rollouts, cfg.num_turns))
    metrics.update(step_timing(started, updating, ended, tokens=sum(r.num_tokens for r in rollouts),
                               generate_s=sum(r.timings["generate_s"] for r in rollouts),
                               reward_s=sum(r.timings["reward_s"] for r in rollouts)))
    metrics.update(weight_sync_metrics(agents))  # rollout_backend vllm: pushing new weights to the engines
    metrics["perf/credit_reward_calls"] = float(probe_calls + sum(r.credit_reward_calls for r in rollouts))
    metrics["perf/credit_s"] = time.perf_counter() - ended
    metrics["train/epoch"] = trainer.epoch_of_last_step()
    return metrics, branch_episodes(branches, trainer.agent_names)
