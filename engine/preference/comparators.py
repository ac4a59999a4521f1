"""Comparators whose candidates arrive as text, for the iterative preference trainers.

The snapshot comparators (current_copy, the initial policy, history, a checkpoint) are the team's
own models with other weights: a :class:`engine.trainer.rollout.TreeBuilder` samples them and the
pairs keep the sampled token ids. Three comparators write text that the team's tokenizers must
read again before a DPO margin can be measured:

* another model per agent (``comparator_model_name`` / ``comparator_agents``), possibly with
  another tokenizer;
* one model writing every role's answer in ``<agent_i>`` sections
  (``comparator_generation_mode="centralized"``), split back into the roles;
* an external HTTP LLM API (``comparator_policy="api"``, :mod:`engine.preference.api_client`).

:class:`TextComparator` turns such texts into scored single-turn nodes shaped like the team's own
(each agent's prompt as the team renders it, each answer encoded by that agent's tokenizer and
closed with its EOS token unless cut at ``max_new_tokens``), so the collector pairs them with the
current candidates exactly as it pairs snapshot candidates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from engine.preference.centralized import CentralizedCollaboration, prompt_text
from engine.trainer.agents import AgentRuntime
from engine.trainer.rollout import (
    AgentSamples,
    Node,
    Rollout,
    TreeBuilder,
    call_formatter,
    joint_action_indices,
    render_prompt,
)

Texts = Sequence[Sequence[Sequence["Answer | str"]]]  # [root][agent][candidate]; a plain string is an ended answer
TextSource = Callable[[list[Node]], Texts]
API_THREADS = 8  # concurrent API requests across the items and agents of a chunk


def encode_answer(agent: AgentRuntime, text: str, *, ended: bool = True) -> list[int]:
    """``text`` as ``agent``'s completion tokens: encoded without special tokens, closed with EOS when
    the comparator ended it (``ended``) and it fits in ``max_new_tokens``, else cut there."""
    ids = list(agent.tokenizer(text, add_special_tokens=False)["input_ids"])
    limit = agent.generation.max_new_tokens
    if len(ids) >= limit or not ended:
        return ids[:limit]
    eos = agent.tokenizer.eos_token_id
    return ids + ([int(eos)] if eos is not None else [])


@dataclass(frozen=True)
class Answer:
    """One comparator answer: its text, and whether its writer ended it (False: cut at its token limit)."""

    text: str
    ended: bool = True


def _sampled_answer(writer: AgentRuntime, completion_ids: list[int], text: str) -> Answer:
    """A sampled completion as an :class:`Answer`: ended when it closes with the writer's EOS."""
    eos = writer.tokenizer.eos_token_id
    return Answer(text, bool(completion_ids) and eos is not None and int(completion_ids[-1]) == int(eos))


@dataclass(eq=False)
class TextComparator:
    """Scored single-turn nodes from candidate texts (see the module docstring). ``tree`` is the
    current candidates' tree: its agents render and encode, its reward scores."""

    tree: TreeBuilder
    source: TextSource
    num_candidates: int
    samplers: Sequence[AgentRuntime] = ()  # the frozen runtimes that write the texts (none for an API)

    def build(self, items: Sequence[dict], item_indices: Sequence[int], *, score: bool = True) -> Rollout:
        started = time.perf_counter()
        roots = self.tree.roots(items, item_indices)
        texts = self.source(roots)
        generate_s = time.perf_counter() - started
        agents = self.tree.agents
        for root, per_agent in zip(roots, texts, strict=True):
            if len(per_agent) != len(agents) or any(len(t) != self.num_candidates for t in per_agent):
                raise ValueError(f"comparator: item {root.item_index} got {[len(t) for t in per_agent]} answers per "
                                 f"agent, expected {self.num_candidates} for each of {len(agents)} agents")
            for agent, raw in zip(agents, per_agent, strict=True):
                answers = [a if isinstance(a, Answer) else Answer(str(a)) for a in raw]
                prompt = render_prompt(root.prompt_values[agent.index], agent.tokenizer,
                                       system_prompt=agent.system_prompt)
                prompt_ids = list(agent.tokenizer(prompt)["input_ids"])
                root.agents.append(AgentSamples(prompts=[prompt] * len(answers), prompt_ids=[prompt_ids] * len(answers),
                                                completion_ids=[encode_answer(agent, a.text, ended=a.ended)
                                                                for a in answers],
                                                texts=[a.text for a in answers]))
            root.joint_actions = joint_action_indices("aligned", len(agents), self.num_candidates)
        t0 = time.perf_counter()
        if score:
            for root in roots:
                self.tree.score_node(root)
        return Rollout(roots=roots, nodes=list(roots), env_steps=len(roots) * self.num_candidates, num_tokens=0,
                       timings={"generate_s": generate_s, "reward_s": time.perf_counter() - t0, "transition_s": 0.0})


def split_roles(collaboration: CentralizedCollaboration, item: dict, answers: Sequence[Answer]) -> list[list[Answer]]:
    """Joint answers split into ``[role][candidate]`` answers (no sections: empty ones); a cut joint
    answer makes every role's part count as cut."""
    split = [(collaboration.split(a.text, item, count=True), a.ended) for a in answers]
    return [[Answer(roles[i], ended) for roles, ended in split] for i in range(collaboration.num_roles)]


def team_texts(tree: TreeBuilder) -> TextSource:
    """Texts of another team (``tree``: the comparator models, each rendering with its own tokenizer)."""

    def texts(roots: list[Node]) -> Texts:
        rollout = tree.build([r.item for r in roots], [r.item_index for r in roots], score=False)
        return [[[_sampled_answer(a, ids, text) for ids, text in zip(node.agents[i].completion_ids,
                                                                       node.agents[i].texts, strict=True)]
                 for i, a in enumerate(tree.agents)] for node in rollout.roots]

    return texts


def centralized_texts(writer: AgentRuntime, collaboration: CentralizedCollaboration, num_candidates: int) -> TextSource:
    """Every role's answers from one model: ``writer`` samples the joint prompt (one call for the whole
    chunk), each completion is split into the roles (a completion without sections: empty answers)."""

    def texts(roots: list[Node]) -> Texts:
        prompts = [render_prompt(collaboration.build_prompt(r.item), writer.tokenizer,
                                 system_prompt=writer.system_prompt) for r in roots]
        sampled, _ = writer.sample(prompts, num_candidates)
        return [split_roles(collaboration, root.item, [_sampled_answer(writer, ids, text) for ids, text in
                                                       zip(sp.completion_ids, sp.texts, strict=True)])
                for root, sp in zip(roots, sampled, strict=True)]

    return texts


def api_texts(client: Any, agents: Sequence[AgentRuntime], num_candidates: int,
              collaboration: CentralizedCollaboration | None = None, writer_index: int = 0) -> TextSource:
    """Texts from an HTTP LLM API (``client``: :class:`engine.preference.api_client.ApiClient`): each
    agent's formatter prompt (or the joint prompt, centralized) asks for ``num_candidates`` answers;
    the requests of a chunk run concurrently."""

    def ask(prompt: str, agent_index: int, item: dict) -> list[str]:
        return client.completions(prompt, num_candidates, agent_index=agent_index, item=item)

    def texts(roots: list[Node]) -> Texts:
        with ThreadPoolExecutor(max_workers=API_THREADS, thread_name_prefix="comparator-api") as pool:
            if collaboration is not None:
                joint = [pool.submit(ask, collaboration.build_prompt(r.item), writer_index, r.item) for r in roots]
                return [split_roles(collaboration, root.item, [Answer(text) for text in future.result()])
                        for root, future in zip(roots, joint, strict=True)]
            futures = [[pool.submit(ask, prompt_text(call_formatter(a.formatter, r.item)), a.index, r.item)
                        for a in agents] for r in roots]
            return [[f.result() for f in row] for row in futures]

    return texts
