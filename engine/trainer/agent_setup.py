"""One agent as a trainer is given it (:class:`AgentSetup`), and CoMLRL's per-agent constructor
arguments turned into one such record per agent (:func:`comlrl_agents`).

CoMLRL passes a team as parallel lists (``agents``, ``tokenizer``, ``formatters``, ``agent_names``,
and CoopLab's ``agent_learning_rates``, ``agent_generation``, ``system_prompts``), each also
accepted as one value for everyone. Inside the engine an agent is one record: the run-config build
makes the records itself and hands them to a trainer as its ``agents``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.trainer.formatting import Formatter, default_formatter, normalize_formatters


@dataclass(frozen=True)
class AgentSetup:
    """One agent before anything is loaded: what it is, how it is prompted, how it samples and learns.

    ``model`` is a model id or folder, or a loaded model (two records holding the same object share
    its weights, each agent keeping its own optimizer). The sampling settings and the learning rate
    left ``None`` are the config's (``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``,
    ``agent_learning_rate``).
    """

    name: str
    model: Any
    tokenizer: Any = None  # None: loaded with a model id (a loaded model needs its tokenizer)
    formatter: Formatter = default_formatter
    system_prompt: str | None = None
    learning_rate: float | None = None
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None


# the constructor arguments (CoMLRL's and CoopLab's) that describe the agents
COMLRL_AGENT_ARGUMENTS = ("agent_model", "agents", "num_agents", "tokenizer", "formatters", "agent_names",
                          "agent_learning_rates", "agent_generation", "system_prompts")


def comlrl_agents(
    config: Any, *, agent_model: Any, agents: Sequence[Any] | None, num_agents: int, tokenizer: Any,
    formatters: Any, agent_names: Sequence[str] | None, agent_learning_rates: Sequence[float | None] | None,
    agent_generation: Sequence[Mapping[str, Any] | None] | None, system_prompts: Sequence[str | None] | None,
) -> list[AgentSetup]:
    """The records for CoMLRL's arguments (see the module docstring). ``agents`` may already be
    :class:`AgentSetup` records; then every other per-agent argument stays unset."""
    if agents is not None and any(isinstance(a, AgentSetup) for a in agents):
        given = {"agent_model": agent_model, "tokenizer": tokenizer, "formatters": formatters,
                 "agent_names": agent_names, "agent_learning_rates": agent_learning_rates,
                 "agent_generation": agent_generation, "system_prompts": system_prompts}
        extra = [name for name, value in given.items() if value is not None]
        if extra or not all(isinstance(a, AgentSetup) for a in agents):
            raise ValueError(f"agents: AgentSetup records carry each agent's settings; pass only records, without "
                             f"{', '.join(extra) or 'other agents'}")
        agent_names_for([a.name for a in agents], config, len(agents))
        return list(agents)
    sources = resolve_sources(agent_model, agents, num_agents)
    n = len(sources)
    names = agent_names_for(agent_names, config, n)
    tokenizers = resolve_tokenizers(tokenizer, n)
    formatters = normalize_formatters(formatters, n)
    learning_rates = list(agent_learning_rates) if agent_learning_rates else [None] * n
    overrides = list(agent_generation) if agent_generation else [None] * n
    prompts = list(system_prompts) if system_prompts else [None] * n
    return [AgentSetup(name=names[i], model=sources[i], tokenizer=tokenizers[i], formatter=formatters[i],
                       system_prompt=prompts[i], learning_rate=learning_rates[i],
                       **{k: v for k, v in (overrides[i] or {}).items() if v is not None})
            for i in range(n)]


def agent_names_for(names: Sequence[str] | None, config: Any, num_agents: int) -> list[str]:
    """Explicit names, else the config's, else ``agent_0..``; they must be distinct, one per agent."""
    chosen = list(names or getattr(config, "agent_names", None) or [f"agent_{i}" for i in range(num_agents)])
    if len(chosen) != num_agents or len(set(chosen)) != len(chosen):
        raise ValueError(f"agent_names must be {num_agents} distinct names, got {chosen}")
    return chosen


def resolve_sources(agent_model: Any, agents: Sequence[Any] | None, num_agents: int) -> list[Any]:
    """The list of per-agent model sources (ids or objects)."""
    if agents is not None:
        agents = list(agents)
        if not agents:
            raise ValueError("agents: the list is empty; pass one model (or id) per agent")
        if isinstance(agent_model, str) and any(isinstance(a, str) and a != agent_model for a in agents):
            raise ValueError("agent_model and agents disagree; pass only one of them")
        return agents
    if agent_model is None:
        raise ValueError("pass agent_model (a model id for every agent) or agents (one model or id per agent)")
    if not isinstance(agent_model, str):
        raise ValueError(
            "agent_model must be a model id or folder; to use loaded model objects pass agents=[...] "
            "(the same object several times shares its weights)"
        )
    if num_agents < 1:
        raise ValueError(f"num_agents must be >= 1, got {num_agents}")
    return [agent_model] * num_agents


def resolve_tokenizers(tokenizer: Any, num_agents: int) -> list[Any]:
    if isinstance(tokenizer, list | tuple):
        if len(tokenizer) != num_agents:
            raise ValueError(f"tokenizer: got {len(tokenizer)} tokenizers for {num_agents} agents")
        return list(tokenizer)
    return [tokenizer] * num_agents
