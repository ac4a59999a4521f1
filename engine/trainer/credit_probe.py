"""Credit made visible: how much each agent's reply added to the team reward, measured each step when asked.

For a few joint actions per step (``credit_samples``: those on the branches reported as transcripts
first, then others drawn at random) the team reward is scored again with one agent's reply left empty,
for every agent; the agent's credit is the difference (:func:`engine.trainer.advantages.removal_credit`).
It is measured whatever estimator trains (``agent/<name>/credit``), recorded on the node for the
transcripts, and costs one reward call per agent and joint action (``perf/credit_reward_calls``,
``perf/credit_s``). Those calls hand the user's reward joint actions it never saw in training (a reply
removed), so the probes are off unless ``credit_samples`` asks for them, never run for a team of one
(:func:`probe_count`), and announced when training starts (:func:`credit_note`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from engine.rewards.team_reward import TeamReward
from engine.trainer.advantages import removal_credit, removal_joint
from engine.trainer.tree import Node, Rollout

Probe = tuple[Node, int]  # a node and one of its joint actions


def probe_count(credit_samples: int, num_agents: int) -> int:
    """Joint actions a step probes: ``credit_samples``, none for one agent (no partner to credit)."""
    return credit_samples if num_agents > 1 else 0


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
