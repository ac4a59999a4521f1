"""The rollout tree: its data, how it grows turn by turn, and the prompts each agent sees.

Growing the rollout tree, level by level.

For every turn all open nodes of the batch are expanded together: each agent samples
``num_generations`` completions for every node's prompt in **one** batched call (agents run
concurrently in ``mp`` mode), the joint actions of each node are scored with the team reward, and on
non-final turns each joint action's branch gets a child node whose prompts come from the external
transition.

The rollout tree's data: nodes, each agent's samples at a node, and a whole rollout.

A node is one history (dataset item + earlier turns). At a node every agent has K samples
(``samples_per_node``, a builder's setting: the config's ``num_generations``, or evaluation's samples per item); the
joint actions combine them (aligned: sample j of every agent; cross: every combination). Each
joint action gets one team reward, and on a non-final turn it may have a child node whose prompts
the external transition built from that branch's own histories.

Prompt building: CoMLRL formatters, chat templates, prompt templates and same-turn peer replies.

A formatter is ``fmt(item) -> str | list[message dict]``, optionally accepting ``external_prompts=``
(CoMLRL's convention for later turns). When it returns chat messages the agent's tokenizer chat
template turns them into the prompt text; a plain string is used as it is (as in CoMLRL).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import torch

from engine.rewards.team_reward import TeamReward
from engine.trainer.agents import AgentRuntime, SampledPrompt, map_agents
from engine.trainer.counterfactual import counterfactual_joints


@dataclass
class RolloutSettings:
    """The parts of the config that shape a tree."""

    samples_per_node: int  # K: num_generations in training, eval_samples_per_item in evaluation,
    # preference_num_candidates for preference pairs (each read from the trainer's config by its caller)
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
                node.joint_actions = joint_action_indices(s.joint_mode, len(self.agents), s.samples_per_node)
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
        num_generations = self.settings.samples_per_node

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
        num_generations = self.settings.samples_per_node
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
                        sampled_logps=_first_logprobs(chunk),
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
        joints = counterfactual_joints(node.joint_actions, self.settings.samples_per_node)
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


def _first_logprobs(chunk: Sequence[SampledPrompt]) -> list[torch.Tensor] | None:
    """Each one-sample prompt's sampled log-probs, or None when the sampler kept none for some."""
    kept = [sp.logprobs[0] for sp in chunk if sp.logprobs is not None]
    return kept if len(kept) == len(chunk) else None


def assign_returns(rollout: Rollout, discount: float) -> None:
    """Post-order: each node's joint-action returns from its rewards and its children's returns."""
    for node in sorted(rollout.nodes, key=lambda n: n.turn, reverse=True):
        child = [node.children[j].returns if j in node.children else None for j in range(len(node.rewards))]
        node.returns = node_returns(node.rewards, child, discount)


def node_returns(rewards: Sequence[float], child_returns: Sequence[Sequence[float] | None],
                 discount: float) -> list[float]:
    """Return of each joint action at a node: ``R_j = r_j + discount * mean(R of child_j)``.

    ``child_returns[j]`` holds the returns of joint action j's child node, or ``None`` for a leaf
    (last turn, or a branch stopped early). CoMLRL 1.4.3 uses ``discount = 1`` whatever is set.
    """
    if len(rewards) != len(child_returns):
        raise ValueError(f"{len(rewards)} rewards but {len(child_returns)} child entries")
    out = []
    for reward, children in zip(rewards, child_returns, strict=True):
        if children:
            out.append(float(reward) + discount * sum(children) / len(children))
        else:
            out.append(float(reward))
    return out


# -- The rollout tree's data: nodes, each agent's samples at a node, and a whole rollout ---------------------
@dataclass
class AgentSamples:
    """One agent's K samples at a node (prompts differ per sample only with sequential turns)."""

    prompts: list[str]
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]  # trimmed: up to and including the first EOS
    texts: list[str]
    values: list[float] = field(default_factory=list)  # returns marginalised over partners
    advantages: list[float] = field(default_factory=list)
    ref_kl: list[float] | None = None  # k3 KL to the reference model per sample
    sampled_logps: list[Any] | None = None  # per sample (T,) token log-probs kept by the sampler

    @property
    def num_generations(self) -> int:
        return len(self.texts)


@dataclass
class Node:
    """One history of one dataset item at one turn, with every agent's samples and the rewards."""

    node_id: int
    item_index: int
    item: dict[str, Any]
    turn: int  # 0-based
    parent: Node | None
    parent_joint: int | None
    prompt_values: list[Any]  # per agent: the formatter's result (text or chat messages), before peers
    prompt_history: list[list[str]]  # per agent: prompts of earlier turns (this one is added on generation)
    response_history: list[list[str]]  # per agent: completions of earlier turns on this branch
    agents: list[AgentSamples] = field(default_factory=list)
    joint_actions: list[tuple[int, ...]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    reward_terms: dict[str, list[float]] = field(default_factory=dict)
    children: dict[int, Node] = field(default_factory=dict)
    returns: list[float] = field(default_factory=list)
    # credit_assignment='counterfactual': the team reward of joint actions that replace one agent's sample
    counterfactual_rewards: dict[tuple[int, ...], float] = field(default_factory=dict)
    credit: dict[int, list[float]] = field(default_factory=dict)  # joint action -> each agent's measured credit

    def joint_completions(self, j: int) -> list[str]:
        """Every agent's completion in joint action ``j``."""
        return [self.agents[i].texts[k] for i, k in enumerate(self.joint_actions[j])]

    def joint_prompts(self, j: int) -> list[str]:
        return [self.agents[i].prompts[k] for i, k in enumerate(self.joint_actions[j])]


@dataclass
class Rollout:
    """The trees grown from a batch of dataset items in one rollout."""

    roots: list[Node]
    nodes: list[Node]  # every node, level by level
    env_steps: int  # joint-action reward evaluations
    num_tokens: int  # generated completion tokens (all agents)
    timings: dict[str, float] = field(default_factory=dict)
    credit_reward_calls: int = 0  # reward evaluations of counterfactual joint actions (not in env_steps)

    def nodes_at_turn(self, turn: int) -> list[Node]:
        return [n for n in self.nodes if n.turn == turn]

    @property
    def num_turns(self) -> int:
        return 1 + max((n.turn for n in self.nodes), default=-1)


def joint_action_indices(mode: str, num_agents: int, num_generations: int) -> list[tuple[int, ...]]:
    """Joint actions as tuples of per-agent sample indices.

    ``aligned``: ``(j, j, ..., j)`` for j < K; ``cross``: the Cartesian product (K^N tuples, the
    last agent varying fastest). One agent is the same in both modes.
    """
    if mode == "cross" and num_agents > 1:
        return list(product(range(num_generations), repeat=num_agents))
    return [(j,) * num_agents for j in range(num_generations)]


def nodes_per_item(mode: str, num_agents: int, num_generations: int, num_turns: int) -> int:
    """Nodes of a full tree (no early termination): ``sum_t J^t`` with J joint actions per node."""
    j = len(joint_action_indices(mode, num_agents, num_generations))
    return sum(j**t for t in range(num_turns))


# -- Prompt building: CoMLRL formatters, chat templates, prompt templates and same-turn peer replies ---------
Formatter = Callable[..., Any]


def default_formatter(item: dict) -> str:
    """CoMLRL's default: the item's ``prompt`` field."""
    if "prompt" not in item:
        raise KeyError(f"dataset item has no 'prompt' field (keys: {sorted(item)}); pass formatters=")
    return str(item["prompt"])


def normalize_formatters(formatters: Formatter | Sequence[Formatter] | None, num_agents: int) -> list[Formatter]:
    """None -> the default for everyone; one callable -> shared; a list must have one per agent."""
    if formatters is None:
        return [default_formatter] * num_agents
    if callable(formatters):
        return [formatters] * num_agents
    formatters = list(formatters)
    if len(formatters) != num_agents:
        raise ValueError(f"formatters: got {len(formatters)} for {num_agents} agents; pass one per agent")
    for i, fmt in enumerate(formatters):
        if not callable(fmt):
            raise ValueError(f"formatters[{i}] is not callable ({type(fmt).__name__})")
    return formatters


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def call_formatter(fmt: Formatter, item: dict, external_prompt: str | None = None) -> Any:
    """Apply a formatter. For a later turn (``external_prompt`` given) a formatter that accepts
    ``external_prompts=`` receives it; otherwise, as in CoMLRL, the prompt is written into a copy
    of the item's ``prompt`` field and the formatter is applied to that."""
    if external_prompt is None:
        return fmt(item)
    if _accepts(fmt, "external_prompts"):
        return fmt(item, external_prompts=external_prompt)
    return fmt({**item, "prompt": external_prompt})


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_prompt(value: Any, tokenizer: Any, *, system_prompt: str | None = None) -> str:
    """Turn a formatter's result into prompt text for one agent.

    * messages (list of ``{"role", "content"}``) -> the tokenizer's chat template with the
      generation prompt (an error if the tokenizer has none);
    * a string -> itself, or, when a ``system_prompt`` is set and the tokenizer has a chat
      template, a system + user conversation rendered by the template; without a template the
      system prompt is put in front of the text.
    """
    if isinstance(value, list | tuple):
        messages = [dict(m) for m in value]
        if system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system_prompt})
        if not has_chat_template(tokenizer):
            raise ValueError(
                "the formatter returned chat messages but the agent's tokenizer has no chat_template; "
                "return a string or use a chat model"
            )
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if not isinstance(value, str):
        raise TypeError(f"a formatter must return a string or chat messages, got {type(value).__name__}")
    if system_prompt:
        if has_chat_template(tokenizer):
            messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": value}]
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return f"{system_prompt}\n\n{value}"
    return value


def template_formatter(template: str) -> Formatter:
    """A formatter from a Python format string over the item (``"Write a helper for: {prompt}"``).

    Later turns substitute the transition's prompt for ``{prompt}``."""

    def fmt(item: dict, external_prompts: str | None = None) -> str:
        fields = dict(item)
        if external_prompts is not None:
            fields["prompt"] = external_prompts
        try:
            return template.format(**fields)
        except KeyError as exc:
            raise KeyError(
                f"prompt_template {template!r} uses {{{exc.args[0]}}} but the item has only {sorted(item)}"
            ) from None

    return fmt


def with_peer_replies(value: Any, peers: Sequence[tuple[str, str]]) -> Any:
    """Add earlier agents' same-turn replies (``turn_order="sequential"``) to a formatter's result:
    appended to a string prompt, or to the last user message of a chat conversation."""
    if not peers:
        return value
    blocks = "\n\n".join(f"[{name}]\n{reply}" for name, reply in peers)
    addition = f"\n\nReplies so far this turn:\n{blocks}\n\nYour reply:"
    if isinstance(value, list | tuple):
        messages = [dict(m) for m in value]
        for message in reversed(messages):
            if message.get("role") == "user":
                message["content"] = f"{message.get('content', '')}{addition}"
                return messages
        return [*messages, {"role": "user", "content": addition.strip()}]
    return f"{value}{addition}"
