"""Growing the rollout tree, level by level.

For every turn all open nodes of the batch are expanded together: each agent samples
``num_generations`` completions for every node's prompt in **one** batched call (agents run
concurrently in ``mp`` mode), the joint actions of each node are scored with the team reward, and on
non-final turns each joint action's branch gets a child node whose prompts come from the external
transition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from engine.rewards.team_reward import TeamReward
from engine.trainer.advantages import counterfactual_joints, node_returns
from engine.trainer.agents import AgentRuntime, SampledPrompt
from engine.trainer.formatting import call_formatter, render_prompt, with_peer_replies
from engine.trainer.parallel import map_agents
from engine.trainer.tree import AgentSamples, Node, Rollout, joint_action_indices


@dataclass
class RolloutSettings:
    """The parts of the config that shape a tree."""

    num_generations: int
    num_turns: int
    joint_mode: str
    turn_order: str
    early_termination_threshold: float | None
    external_prompt_passthrough: bool
    greedy: bool = False
    expand_first_only: bool = False  # evaluation: follow one path (joint action 0) instead of a tree
    counterfactual: bool = False  # also score the joint actions that replace one agent's sample


class TransitionError(RuntimeError):
    """The external transition returned something that cannot become the next prompts."""


def call_transition(transition: Callable, node: Node, joint: int, num_agents: int) -> list[str]:
    """CoMLRL's keyword-only transition call for one branch, with that branch's histories."""
    completions = node.joint_completions(joint)
    prompt_history = [list(h) + [node.agents[i].prompts[node.joint_actions[joint][i]]]
                      for i, h in enumerate(node.prompt_history)]
    response_history = [list(h) + [completions[i]] for i, h in enumerate(node.response_history)]
    prompts = transition(
        prompt=node.item.get("prompt", ""),
        agent_completions=completions,
        num_agents=num_agents,
        prompt_history_per_agent=prompt_history,
        response_history_per_agent=response_history,
    )
    if isinstance(prompts, str) or not isinstance(prompts, list | tuple) or len(prompts) != num_agents:
        raise TransitionError(
            f"external_transition must return a list of {num_agents} prompts (one per agent), got {prompts!r:.200}"
        )
    return [str(p) for p in prompts]


@dataclass(eq=False)
class TreeBuilder:
    """Builds rollouts for a team. Holds no state between rollouts except a node counter."""

    agents: list[AgentRuntime]
    reward: TeamReward
    transition: Callable | None
    settings: RolloutSettings
    pool: ThreadPoolExecutor | None = None
    _next_id: int = field(default=0, init=False, repr=False)

    def _new_node(self, **kwargs: Any) -> Node:
        node = Node(node_id=self._next_id, **kwargs)
        self._next_id += 1
        return node

    def _render(self, agent: AgentRuntime, value: Any, peers: list[tuple[str, str]] | None = None) -> str:
        return render_prompt(with_peer_replies(value, peers or []), agent.tokenizer, system_prompt=agent.system_prompt)

    def roots(self, items: Sequence[dict], item_indices: Sequence[int]) -> list[Node]:
        """Turn-0 nodes: each agent's formatter applied to the item."""
        n = len(self.agents)
        return [
            self._new_node(item_index=int(idx), item=dict(item), turn=0, parent=None, parent_joint=None,
                           prompt_values=[call_formatter(a.formatter, item) for a in self.agents],
                           prompt_history=[[] for _ in range(n)], response_history=[[] for _ in range(n)])
            for item, idx in zip(items, item_indices, strict=True)
        ]

    def build(self, items: Sequence[dict], item_indices: Sequence[int], *, score: bool = True) -> Rollout:
        """Grow the trees of ``items`` through every turn; returns the scored rollout. With ``score``
        False (single turn only) the reward is not called and the nodes' rewards stay empty."""
        s = self.settings
        if not score and s.num_turns > 1:
            raise ValueError("a rollout without scoring covers one turn: with num_turns > 1 the tree needs "
                             "each turn's rewards (early termination, returns); score it or use num_turns=1")
        timings = {"generate_s": 0.0, "reward_s": 0.0, "transition_s": 0.0}
        level = self.roots(items, item_indices)
        nodes: list[Node] = []
        env_steps = 0
        num_tokens = 0
        extra_calls = 0
        for turn in range(s.num_turns):
            if not level:
                break
            t0 = time.perf_counter()
            num_tokens += self._generate_level(level)
            timings["generate_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            for node in level:
                node.joint_actions = joint_action_indices(s.joint_mode, len(self.agents), s.num_generations)
                if score:
                    self.score_node(node)
                    extra_calls += self.score_counterfactuals(node)
                env_steps += len(node.joint_actions)
            timings["reward_s"] += time.perf_counter() - t0
            nodes.extend(level)
            if turn == s.num_turns - 1:
                break
            t0 = time.perf_counter()
            level = self._expand(level)
            timings["transition_s"] += time.perf_counter() - t0
        return Rollout(roots=[n for n in nodes if n.turn == 0], nodes=nodes, env_steps=env_steps,
                       num_tokens=num_tokens, timings=timings, credit_reward_calls=extra_calls)

    # -- generation ----------------------------------------------------------------------------
    def _generate_level(self, level: list[Node]) -> int:
        if self.settings.turn_order == "sequential" and len(self.agents) > 1:
            return self._generate_sequential(level)
        num_generations = self.settings.num_generations

        def run(agent: AgentRuntime) -> tuple[list[SampledPrompt], int, list[str]]:
            prompts = [self._render(agent, node.prompt_values[agent.index]) for node in level]
            sampled, tokens = agent.sample(prompts, num_generations, greedy=self.settings.greedy)
            return sampled, tokens, prompts

        results = map_agents(run, self.agents, self.pool)
        total = 0
        for sampled, tokens, prompts in results:
            total += tokens
            for node, sp, prompt in zip(level, sampled, prompts, strict=True):
                node.agents.append(AgentSamples(prompts=[prompt] * num_generations,
                                                prompt_ids=[sp.prompt_ids] * num_generations,
                                                completion_ids=sp.completion_ids, texts=sp.texts,
                                                sampled_logps=sp.logprobs))
        return total

    def _generate_sequential(self, level: list[Node]) -> int:
        """Agent 0 samples ``num_generations`` per node; agent i > 0 samples once per (node, j) with the
        replies of agents < i in joint action j added to its prompt, so joint action j is a real dialogue."""
        num_generations = self.settings.num_generations
        total = 0
        for agent in self.agents:
            if agent.index == 0:
                prompts = [self._render(agent, node.prompt_values[0]) for node in level]
                sampled, tokens = agent.sample(prompts, num_generations, greedy=self.settings.greedy)
                for node, sp, prompt in zip(level, sampled, prompts, strict=True):
                    node.agents.append(AgentSamples([prompt] * num_generations, [sp.prompt_ids] * num_generations,
                                                    sp.completion_ids, sp.texts, sampled_logps=sp.logprobs))
            else:
                prompts = []
                for node in level:
                    for j in range(num_generations):
                        peers = [(self.agents[p].name, node.agents[p].texts[j]) for p in range(agent.index)]
                        prompts.append(self._render(agent, node.prompt_values[agent.index], peers))
                sampled, tokens = agent.sample(prompts, 1, greedy=self.settings.greedy)
                for n_idx, node in enumerate(level):
                    rows = slice(n_idx * num_generations, (n_idx + 1) * num_generations)
                    chunk = sampled[rows]
                    node.agents.append(AgentSamples(
                        prompts=prompts[rows],
                        prompt_ids=[sp.prompt_ids for sp in chunk],
                        completion_ids=[sp.completion_ids[0] for sp in chunk],
                        texts=[sp.texts[0] for sp in chunk],
                        sampled_logps=None if any(sp.logprobs is None for sp in chunk)
                        else [sp.logprobs[0] for sp in chunk],
                    ))
            total += tokens
        return total

    # -- rewards and expansion -----------------------------------------------------------------
    def score_node(self, node: Node) -> None:
        """The team reward of each of ``node``'s joint actions (``node.rewards``, ``node.reward_terms``)."""
        joint = node.joint_actions
        completions = [[node.agents[i].texts[ja[i]] for ja in joint] for i in range(len(self.agents))]
        prompts = [[node.agents[i].prompts[ja[i]] for ja in joint] for i in range(len(self.agents))]
        node.rewards, node.reward_terms = self.reward.score(completions, [node.item] * len(joint), prompts)

    def score_counterfactuals(self, node: Node) -> int:
        """With ``counterfactual``: the team reward of every joint action that replaces one agent's sample
        by another of its samples and is not a joint action of the node already
        (``node.counterfactual_rewards``), in one reward call per node. Returns how many were scored."""
        if not self.settings.counterfactual or len(self.agents) < 2:
            return 0
        joints = counterfactual_joints(node.joint_actions, self.settings.num_generations)
        if joints:
            completions = [[node.agents[i].texts[ja[i]] for ja in joints] for i in range(len(self.agents))]
            prompts = [[node.agents[i].prompts[ja[i]] for ja in joints] for i in range(len(self.agents))]
            rewards, _ = self.reward.score(completions, [node.item] * len(joints), prompts)
            node.counterfactual_rewards = dict(zip(joints, rewards, strict=True))
        return len(joints)

    def _expand(self, level: list[Node]) -> list[Node]:
        s = self.settings
        if self.transition is None:
            raise TransitionError("num_turns > 1 needs an external_transition to build the next prompts")
        children: list[Node] = []
        for node in level:
            mean_reward = sum(node.rewards) / len(node.rewards)
            if s.early_termination_threshold is not None and mean_reward > s.early_termination_threshold:
                continue
            for j, ja in enumerate(node.joint_actions):
                if s.expand_first_only and j > 0:
                    break
                next_prompts = call_transition(self.transition, node, j, len(self.agents))
                values = []
                for agent, text in zip(self.agents, next_prompts, strict=True):
                    values.append(text if s.external_prompt_passthrough
                                  else call_formatter(agent.formatter, node.item, external_prompt=text))
                child = self._new_node(
                    item_index=node.item_index, item=node.item, turn=node.turn + 1, parent=node, parent_joint=j,
                    prompt_values=values,
                    prompt_history=[h + [node.agents[i].prompts[ja[i]]] for i, h in enumerate(node.prompt_history)],
                    response_history=[h + [node.agents[i].texts[ja[i]]] for i, h in enumerate(node.response_history)],
                )
                node.children[j] = child
                children.append(child)
        return children


def assign_returns(rollout: Rollout, discount: float) -> None:
    """Post-order: each node's joint-action returns from its rewards and its children's returns."""
    for node in sorted(rollout.nodes, key=lambda n: n.turn, reverse=True):
        child = [node.children[j].returns if j in node.children else None for j in range(len(node.rewards))]
        node.returns = node_returns(node.rewards, child, discount)
