"""The team of a run config, built once for every algorithm and for systems of trainers.

``load_team`` loads each agent's model and tokenizer (``share_weights_with`` reuses an earlier
agent's objects, so they share weights while keeping their own optimizer state; with LoRA they
share one frozen base and train an adapter each); ``agent_setups`` makes of the loaded team one
:class:`engine.trainer.setup.AgentSetup` record per agent (name, model, tokenizer, formatter,
system prompt, learning rate, sampling overrides), which every trainer takes as its ``agents``.
Where agents go is decided with their config (:func:`engine.schema.configure.team_devices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.schema.run_config import AgentSpec
from engine.trainer.rollout import template_formatter
from engine.trainer.setup import AgentSetup


@dataclass
class Team:
    """Loaded models and tokenizers, one per agent (shared objects where weights are shared)."""

    agents: list[AgentSpec]
    models: list[Any]
    tokenizers: list[Any]


def load_team(agents: Sequence[AgentSpec], devices: Sequence[str], dtype: Any, *, seed: int = 0,
              allow_remote_code: bool | None = None) -> Team:
    """Load every agent (see the module docstring); one device is used for all, else one per agent.
    Agents with ``lora_rank`` get a LoRA adapter (seeded by ``seed``) on their frozen base, which
    agents sharing weights share (:mod:`engine.lora`). ``allow_remote_code``: the operator's permission
    for code that comes with a model (:mod:`engine.permissions.remote_code`; None: library use)."""
    from engine.lora import lora_settings_of, lora_team
    from engine.models import load_agent

    models: list[Any] = []
    tokenizers: list[Any] = []
    by_name: dict[str, int] = {}
    for i, agent in enumerate(agents):
        if agent.share_weights_with is not None:
            j = by_name[agent.share_weights_with]
            models.append(models[j])
            tokenizers.append(tokenizers[j])
        else:
            model, tokenizer = load_agent(agent.model, tokenizer=agent.tokenizer,
                                          device=devices[i if len(devices) > 1 else 0], dtype=dtype,
                                          model_kwargs=dict(agent.model_kwargs),
                                          allow_remote_code=allow_remote_code)
            models.append(model)
            tokenizers.append(tokenizer)
        by_name[agent.name] = i
    settings = [lora_settings_of(a) for a in agents]
    if any(settings):
        models = lora_team(models, settings, seed=seed)
    return Team(list(agents), models, tokenizers)


def agent_setups(team: Team, task_formatters: Sequence[Any]) -> list[AgentSetup]:
    """One record per agent of a loaded team, as every trainer takes them (``agents=``);
    ``task_formatters[i]`` is agent i's formatter unless the agent has a ``prompt_template``."""
    return [
        AgentSetup(name=a.name, model=model, tokenizer=tokenizer,
                   formatter=template_formatter(a.prompt_template) if a.prompt_template else task_formatters[i],
                   system_prompt=a.system_prompt, learning_rate=a.learning_rate, max_new_tokens=a.max_new_tokens,
                   temperature=a.temperature, top_p=a.top_p, top_k=a.top_k)
        for i, (a, model, tokenizer) in enumerate(zip(team.agents, team.models, team.tokenizers, strict=True))
    ]
