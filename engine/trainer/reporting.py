"""What a training step reports: metric dicts (keys as DESIGN.md lists) and sampled episodes."""

from __future__ import annotations

import random
from collections.abc import Sequence

from engine.sinks.base import Episode, TurnRecord
from engine.trainer.credit_probe import branch_path
from engine.trainer.tree import Node, Rollout


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
    credit where the step measured it (:mod:`engine.trainer.credit_probe`)."""
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
