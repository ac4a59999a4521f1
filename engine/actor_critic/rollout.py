"""Actor-critic rollouts: trajectories (chains), not trees.

Each dataset item starts ``num_generations`` chains. At every turn each agent samples one reply per
active chain in **one** batched call, the joint action of each chain is scored (one team reward,
or one reward per agent), and on non-final turns the external transition builds each chain's next
prompts from that chain's own histories. Chains end after ``num_turns`` or, with an early
termination threshold, when their turn's mean reward is above it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.rewards.team_reward import RewardError, TeamReward, call_reward_function, check_reward_values
from engine.trainer.agents import AgentRuntime
from engine.trainer.losses import TrainSample, k3_kl
from engine.trainer.magrpo import score_logprobs
from engine.trainer.rollout import call_formatter, render_prompt


@dataclass
class TurnSample:
    """One agent's reply at one turn of one chain, with its reward and (later) its critic numbers."""

    chain: int
    turn: int
    agent: int
    prompt: str
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    reward: float
    old_value: float = 0.0
    target: float = 0.0
    advantage: float = 0.0
    ref_kl: float | None = None


@dataclass
class Chain:
    """One trajectory of one dataset item: per turn, every agent's :class:`TurnSample`."""

    index: int
    item_index: int
    item: dict[str, Any]
    prompt_values: list[Any]
    prompt_history: list[list[str]]
    response_history: list[list[str]]
    turns: list[list[TurnSample]] = field(default_factory=list)
    done: bool = False
    joint_old_values: list[list[float]] = field(default_factory=list)  # MAAC: per turn, one value per agent

    @property
    def num_turns(self) -> int:
        return len(self.turns)


@dataclass
class ACRollout:
    """The chains of one rollout plus counters."""

    chains: list[Chain]
    env_steps: int
    num_tokens: int
    timings: dict[str, float]
    reward_terms: dict[str, list[float]] = field(default_factory=dict)

    def samples(self, agent: int) -> list[TurnSample]:
        """Agent ``agent``'s samples, chain by chain, turn by turn."""
        return [turn[agent] for chain in self.chains for turn in chain.turns]


class AgentRewards:
    """Scores joint actions with one team reward or one reward per agent.

    * a reward-term object (``score``/``term_names``): team totals, broadcast to every agent;
    * a function with ``batched = True``: called once with full lists; returns J values (team) or
      J * N values (row-major: joint action j, agent i at ``j * N + i``);
    * a plain CoMLRL function: called once per joint action with one-element lists; returns 1
      value (team) or N values (one per agent; CoMLRL's IAC/MAAC accept this too).
    """

    def __init__(self, reward_func: Any, reward_processor: Callable[[float], float] | None, num_agents: int) -> None:
        self.team = TeamReward(reward_func, None)
        self.processor = reward_processor
        self.num_agents = num_agents

    def score(self, completions: Sequence[Sequence[str]], items: Sequence[dict],
              prompts: Sequence[Sequence[str]]) -> tuple[list[list[float]], dict[str, list[float]]]:
        """``(rewards[j][i], terms)`` for J joint actions (``completions[i][j]``)."""
        n, num_joint = self.num_agents, len(items)
        name = self.team.name
        source = f"reward function {name}"
        terms: dict[str, list[float]] = {}
        if self.team.is_term_object:
            totals, terms = self.team.score(completions, items, prompts)
            rows = [[v] * n for v in totals]
        elif self.team.batched:
            values = call_reward_function(self.team.reward_func, completions, batch_items=items, prompts=prompts)
            if len(values) == num_joint:
                rows = [[v] * n for v in check_reward_values(values, num_joint, source)]
            elif len(values) == num_joint * n and n > 1:
                flat = check_reward_values(values, num_joint * n, source)
                rows = [flat[j * n:(j + 1) * n] for j in range(num_joint)]
            else:
                raise RewardError(f"reward function {name} returned {len(values)} values for {num_joint} joint "
                                  f"actions; return {num_joint} team rewards or {num_joint * n} per-agent rewards")
        else:
            rows = []
            for j in range(num_joint):
                values = call_reward_function(self.team.reward_func, [[c[j]] for c in completions],
                                              batch_items=[items[j]], prompts=[[p[j]] for p in prompts])
                if len(values) == 1:
                    rows.append(check_reward_values(values, 1, source) * n)
                elif len(values) == n:
                    rows.append(check_reward_values(values, n, source))
                else:
                    raise RewardError(f"reward function {name} returned {len(values)} values for one joint action; "
                                      f"return 1 team reward or {n} per-agent rewards")
        if self.processor is not None:
            rows = [check_reward_values([float(self.processor(v)) for v in row], n, "reward_processor") for row in rows]
        return rows, terms


@dataclass
class ChainSettings:
    """The config parts that shape a rollout."""

    num_generations: int
    num_turns: int
    early_termination_threshold: float | None
    external_prompt_passthrough: bool
    reference_kl_coef: float = 0.0  # > 0: KL-in-reward against each agent's reference model
    greedy: bool = False


def run_chains(agents: Sequence[AgentRuntime], rewards: AgentRewards, transition: Callable | None,
               items: Sequence[dict], item_indices: Sequence[int], settings: ChainSettings) -> ACRollout:
    """Roll out ``num_generations`` chains per item through every turn (see the module docstring)."""
    n = len(agents)
    chains = [
        Chain(index=c, item_index=int(idx), item=dict(item),
              prompt_values=[call_formatter(a.formatter, item) for a in agents],
              prompt_history=[[] for _ in range(n)], response_history=[[] for _ in range(n)])
        for c, (item, idx) in enumerate((it, ix) for it, ix in zip(items, item_indices, strict=True)
                                        for _ in range(settings.num_generations))
    ]
    timings = {"generate_s": 0.0, "reward_s": 0.0, "transition_s": 0.0}
    env_steps = num_tokens = 0
    terms: dict[str, list[float]] = {}
    for turn in range(settings.num_turns):
        active = [c for c in chains if not c.done]
        if not active:
            break
        t0 = time.perf_counter()
        per_agent = []
        for agent in agents:
            prompts = [render_prompt(c.prompt_values[agent.index], agent.tokenizer, system_prompt=agent.system_prompt)
                       for c in active]
            sampled, tokens = agent.sample(prompts, 1, greedy=settings.greedy)
            num_tokens += tokens
            per_agent.append((prompts, sampled))
        timings["generate_s"] += time.perf_counter() - t0
        kls = _reference_kls(agents, per_agent) if settings.reference_kl_coef > 0 else None
        t0 = time.perf_counter()
        completions = [[sp.texts[0] for sp in sampled] for _, sampled in per_agent]
        prompt_lists = [prompts for prompts, _ in per_agent]
        rows, step_terms = rewards.score(completions, [c.item for c in active], prompt_lists)
        for key, values in step_terms.items():
            terms.setdefault(key, []).extend(values)
        env_steps += len(active)
        timings["reward_s"] += time.perf_counter() - t0
        for j, chain in enumerate(active):
            record = []
            for i in range(n):
                prompts, sampled = per_agent[i]
                reward = rows[j][i]
                kl = None
                if kls is not None:
                    kl = kls[i][j]
                    reward -= settings.reference_kl_coef * kl
                record.append(TurnSample(chain=chain.index, turn=turn, agent=i, prompt=prompts[j],
                                         prompt_ids=sampled[j].prompt_ids, completion_ids=sampled[j].completion_ids[0],
                                         text=sampled[j].texts[0], reward=reward, ref_kl=kl))
            chain.turns.append(record)
            threshold = settings.early_termination_threshold
            if threshold is not None and sum(rows[j]) / n > threshold:
                chain.done = True
        if turn == settings.num_turns - 1:
            break
        t0 = time.perf_counter()
        for chain in active:
            if not chain.done:
                _advance(chain, agents, transition, settings)
        timings["transition_s"] += time.perf_counter() - t0
    return ACRollout(chains=chains, env_steps=env_steps, num_tokens=num_tokens, timings=timings, reward_terms=terms)


def _advance(chain: Chain, agents: Sequence[AgentRuntime], transition: Callable | None,
             settings: ChainSettings) -> None:
    """Append this turn to the chain's histories and build its next prompts with the transition."""
    if transition is None:
        raise ValueError("num_turns > 1 needs an external_transition to build the next prompts")
    last = chain.turns[-1]
    for i, sample in enumerate(last):
        chain.prompt_history[i].append(sample.prompt)
        chain.response_history[i].append(sample.text)
    n = len(agents)
    prompts = transition(prompt=chain.item.get("prompt", ""), agent_completions=[s.text for s in last],
                         num_agents=n, prompt_history_per_agent=[list(h) for h in chain.prompt_history],
                         response_history_per_agent=[list(h) for h in chain.response_history])
    if isinstance(prompts, str) or not isinstance(prompts, list | tuple) or len(prompts) != n:
        raise ValueError(f"external_transition must return a list of {n} prompts (one per agent), got {prompts!r:.200}")
    chain.prompt_values = [
        str(text) if settings.external_prompt_passthrough
        else call_formatter(agent.formatter, chain.item, external_prompt=str(text))
        for agent, text in zip(agents, prompts, strict=True)
    ]


def _reference_kls(agents: Sequence[AgentRuntime], per_agent: list) -> list[list[float]]:
    """Per agent, per chain: the summed k3 KL of the reply to the agent's reference model."""
    out = []
    for agent, (_, sampled) in zip(agents, per_agent, strict=True):
        samples = [TrainSample((0, j), 0, sp.prompt_ids, sp.completion_ids[0]) for j, sp in enumerate(sampled)]
        score_logprobs(agent, samples, reference=False)
        score_logprobs(agent, samples, reference=True)
        kls = []
        for s in samples:
            assert s.old_logps is not None and s.ref_logps is not None  # scored just above
            kls.append(float(k3_kl(s.old_logps, s.ref_logps).sum()))
        out.append(kls)
    return out
