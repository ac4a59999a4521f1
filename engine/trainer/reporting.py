"""What a training step reports: metrics, sampled episodes, and each agent's measured credit.

What a training step reports: metric dicts (keys as DESIGN.md lists) and sampled episodes.

Credit made visible: how much each agent's reply added to the team reward, measured each step when asked.

For a few joint actions per step (``credit_samples``: those on the branches reported as transcripts
first, then others drawn at random) the team reward is scored again with one agent's reply left empty,
for every agent; the agent's credit is the difference (:func:`removal_credit`).
It is measured whatever estimator trains (``agent/<name>/credit``), recorded on the node for the
transcripts, and costs one reward call per agent and joint action (``perf/credit_reward_calls``,
``perf/credit_s``). Those calls hand the user's reward joint actions it never saw in training (a reply
removed), so the probes are off unless ``credit_samples`` asks for them, never run for a team of one
(:func:`probe_count`), and announced when training starts (:func:`engine.trainer.magrpo.credit_note`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from engine.rewards.team_reward import TeamReward
from engine.sinks.base import Episode, TurnRecord
from engine.trainer.rollout import Node, Rollout


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def rollout_metrics(rollouts: Sequence[Rollout], num_turns: int) -> dict[str, float]:
    """Team reward and return per turn, reward terms, and KL to the reference when measured.

    ``train/reward_mean`` averages every joint action's reward of the step (all turns);
    ``turn_t/reward_mean`` the joint actions at turn t; ``turn_t/expected_return`` their returns.
    """
    nodes = [n for r in rollouts for n in r.nodes]
    metrics: dict[str, float] = {
        "train/reward_mean": _mean([x for n in nodes for x in n.rewards]),
        "train/return_mean": _mean([x for n in nodes if n.turn == 0 for x in n.returns]),
    }
    for t in range(num_turns):
        at_t = [n for n in nodes if n.turn == t]
        if not at_t:
            continue
        metrics[f"turn_{t + 1}/reward_mean"] = _mean([x for n in at_t for x in n.rewards])
        metrics[f"turn_{t + 1}/expected_return"] = _mean([x for n in at_t for x in n.returns])
        kls = [x for n in at_t for a in n.agents if a.ref_kl is not None for x in a.ref_kl]
        if kls:
            metrics[f"turn_{t + 1}/reference_kl_mean"] = _mean(kls)
    terms: dict[str, list[float]] = {}
    for n in nodes:
        for term, values in n.reward_terms.items():
            terms.setdefault(term, []).extend(values)
    for term, values in terms.items():
        metrics[f"reward/{term}"] = _mean(values)
    return metrics


def choose_branches(rollouts: Sequence[Rollout], count: int, rng: random.Random) -> list[tuple[Node, int]]:
    """``count`` random branches, each as its leaf: a node and a joint action with no child."""
    leaves: list[tuple[Node, int]] = []
    for rollout in rollouts:
        for node in rollout.nodes:
            leaves.extend((node, j) for j in range(len(node.rewards)) if j not in node.children)
    if not leaves or count <= 0:
        return []
    return rng.sample(leaves, min(count, len(leaves)))


def sample_episodes(rollouts: Sequence[Rollout], names: Sequence[str], count: int, rng: random.Random,
                    *, split: str = "train") -> list[Episode]:
    """``count`` random branches (leaf to root), each as an :class:`Episode` of per-turn records."""
    return branch_episodes(choose_branches(rollouts, count, rng), names, split=split)


def branch_episodes(branches: Sequence[tuple[Node, int]], names: Sequence[str], *, split: str = "train") -> list[Episode]:
    """Each branch (its leaf node and joint action) as an :class:`Episode`."""
    return [branch_episode(node, j, names, index, split=split) for index, (node, j) in enumerate(branches)]


def branch_episode(node: Node, joint: int, names: Sequence[str], sample_index: int, *, split: str) -> Episode:
    """The branch ending at joint action ``joint`` of ``node``, root first, with each turn's measured
    credit where the step measured it (:mod:`engine.trainer.reporting`)."""
    turns: list[TurnRecord] = []
    for n, jj in branch_path(node, joint):
        credit = n.credit.get(jj)
        for i, k in enumerate(n.joint_actions[jj]):
            samples = n.agents[i]
            turns.append(TurnRecord(
                turn=n.turn + 1, agent_index=i, agent_name=names[i], prompt=samples.prompts[k],
                completion=samples.texts[k], reward=float(n.rewards[jj]),
                ret=float(n.returns[jj]) if n.returns else float(n.rewards[jj]),
                advantage=float(samples.advantages[k]) if samples.advantages else 0.0,
                credit=float(credit[i]) if credit is not None else None,
            ))
    return Episode(sample_index=sample_index, split=split, item_index=node.item_index, turns=tuple(turns))


# -- Credit made visible: how much each agent's reply added to the team reward, measured each step whe... ----
Probe = tuple[Node, int]  # a node and one of its joint actions


def probe_count(credit_samples: int, num_agents: int) -> int:
    """Joint actions a step probes: ``credit_samples``, none for one agent (no partner to credit)."""
    return credit_samples if num_agents > 1 else 0


def branch_path(node: Node, joint: int) -> list[Probe]:
    """The joint actions from the root to ``joint`` of ``node``, root first."""
    path: list[Probe] = []
    current: Node | None = node
    while current is not None:
        path.append((current, joint))
        joint = current.parent_joint if current.parent_joint is not None else 0
        current = current.parent
    return path[::-1]


def choose_probes(rollouts: Sequence[Rollout], branches: Sequence[Probe], count: int,
                  rng: random.Random) -> list[Probe]:
    """Up to ``count`` joint actions: those on ``branches`` (the reported transcripts) first, then
    others drawn at random from every node of the step."""
    if count <= 0:
        return []
    chosen: list[Probe] = []
    seen: set[tuple[int, int]] = set()
    for node, joint in branches:
        for probe in branch_path(node, joint):
            key = (id(probe[0]), probe[1])
            if key not in seen and len(chosen) < count:
                seen.add(key)
                chosen.append(probe)
    if len(chosen) < count:
        rest = [(node, j) for rollout in rollouts for node in rollout.nodes for j in range(len(node.rewards))
                if (id(node), j) not in seen]
        chosen += rng.sample(rest, min(count - len(chosen), len(rest)))
    return chosen


def removal_joint(completions: Sequence[str], agent: int) -> list[str]:
    """The joint action's completions with agent ``agent``'s reply left empty."""
    return [("" if i == agent else text) for i, text in enumerate(completions)]


def removal_credit(team_reward: float, rewards_without: Sequence[float]) -> list[float]:
    """Each agent's credit for one joint action: the team reward less the reward with that agent's
    reply left empty (``rewards_without[i]``)."""
    return [float(team_reward) - float(r) for r in rewards_without]


def measure_credit(reward: TeamReward, probes: Sequence[Probe], num_agents: int) -> int:
    """Each probed joint action's per-agent credit, set in ``node.credit[joint]``; one reward call per
    agent and probe, batched per node. Returns the number of reward calls."""
    by_node: dict[int, tuple[Node, list[int]]] = {}
    for node, joint in probes:
        by_node.setdefault(id(node), (node, []))[1].append(joint)
    calls = 0
    for node, joints in by_node.values():
        rows = [(j, i) for j in joints for i in range(num_agents)]
        emptied = [removal_joint(node.joint_completions(j), i) for j, i in rows]
        completions = [[row[a] for row in emptied] for a in range(num_agents)]
        prompts = [[node.joint_prompts(j)[a] for j, _ in rows] for a in range(num_agents)]
        without, _ = reward.score(completions, [node.item] * len(rows), prompts)
        for n, j in enumerate(joints):
            node.credit[j] = removal_credit(node.rewards[j], without[n * num_agents:(n + 1) * num_agents])
        calls += len(rows)
    return calls


def credit_metrics(probes: Sequence[Probe], names: Sequence[str]) -> dict[str, float]:
    """``agent/<name>/credit``: each agent's mean credit over the step's probed joint actions."""
    if not probes:
        return {}
    values = [node.credit[joint] for node, joint in probes]
    return {f"agent/{name}/credit": sum(v[i] for v in values) / len(values) for i, name in enumerate(names)}


# -- what the update reports ------------------------------------------------------------------------
def agent_metrics(agents: Sequence[Any], kls: Sequence[Sequence[float] | None], stats: Sequence[dict[str, float]],
                  lr_factor: float) -> dict[str, float]:
    """``agent/<name>/...``: each agent's update statistics, its learning rate and its mean KL to the
    reference when measured (``kls``: each agent's per-sample KL, None when not scored)."""
    metrics: dict[str, float] = {}
    for agent, kl, agent_stats in zip(agents, kls, stats, strict=True):
        prefix = f"agent/{agent.name}/"
        metrics.update({prefix + k: v for k, v in agent_stats.items()})
        metrics[prefix + "lr"] = agent.learning_rate * lr_factor
        if kl is not None:
            metrics[prefix + "kl"] = float(sum(kl) / max(len(kl), 1))
    for key in ("sampler_kl", "tis_clipped"):  # the rollout correction, across agents
        values = [s[key] for s in stats if key in s]
        if values:
            metrics[f"perf/{key}"] = sum(values) / len(values)
    return metrics
