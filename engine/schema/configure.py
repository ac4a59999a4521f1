"""From a run config's sections to the trainer's config object (its task is built by
:func:`engine.tasks.building.build_task_for`).

``trainer_config`` maps a ``TrainerSpec`` onto the algorithm's config class (``MAGRPOConfig`` for
the MAGRPO family, ``IACConfig``/``MAACConfig`` for actor-critic): each setting the algorithm reads
(the catalog's ``reads``) is copied under its one name, and the settings a run config does not hold
come from its team (:func:`team_settings`). Settings of the run config that the algorithm does not
read are refused when changed from their defaults, so a form never silently ignores a choice.
:func:`trainer_problems` lists every refusal at once: the dashboard's form shows them at their fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.schema.catalog import ALGORITHM_BASELINES
from engine.schema.collaboration import centralized_team_problems, is_centralized
from engine.schema.config_class import config_class, read_settings, unused_settings
from engine.schema.fsdp_rules import fsdp_problems
from engine.schema.run_config import AgentSpec, ConfigError, TrainerSpec
from engine.schema.run_config_sections import has_critics


def team_devices(spec: Any, agents: Sequence[AgentSpec]) -> list[str]:
    """Agent devices for a trainer spec: ``mp`` uses ``agent_devices``; otherwise the first agent's own
    device, else the run's ``device`` (one device for the whole team)."""
    if spec.parallel_training == "mp":
        return list(spec.agent_devices)
    first = next((a.device for a in agents if a.device), None)
    return [first or spec.device]


def team_settings(spec: Any, agents: Sequence[AgentSpec]) -> dict[str, Any]:
    """The config-class settings a run config gives through its team (``agents``) and its ``torch_dtype``."""
    return {"num_agents": len(agents), "agent_names": [a.name for a in agents],
            "agent_devices": team_devices(spec, agents),
            "model_config": {"torch_dtype": None if spec.torch_dtype == "auto" else spec.torch_dtype}}


def trainer_problems(spec: TrainerSpec, agents: Sequence[AgentSpec]) -> list[str]:
    """Every reason :func:`trainer_config` would refuse ``spec`` for this team, one ``field: message``
    each (the field dotted from the run config: ``trainer.clip_epsilon``, ``trainer.actor_critic.x``,
    ``agents``); empty when it builds. The dashboard's form shows each next to its field."""
    _, problems = _config_values(spec, list(agents))
    if problems:
        return problems
    try:
        trainer_config(spec, list(agents))
    except ConfigError as exc:
        return [str(exc)]
    return []


def trainer_config(spec: TrainerSpec, agents: list[AgentSpec]) -> Any:
    """The algorithm's config object for a trainer spec (see the module docstring); raises
    :class:`ConfigError` naming the first problem (:func:`trainer_problems` lists all of them)."""
    values, problems = _config_values(spec, agents)
    if problems:
        raise ConfigError(problems[0])
    given = spec.actor_critic.given() if has_critics(spec.algorithm, spec.rl_algorithm) else {}
    try:
        return config_class(spec.algorithm)(**values)
    except ValueError as exc:
        name = str(exc).partition(": ")[0]
        raise ConfigError(f"trainer.{'actor_critic.' if name in given else ''}{exc}") from None


def _config_values(spec: TrainerSpec, agents: list[AgentSpec]) -> tuple[dict[str, Any], list[str]]:
    """The config class's keyword arguments for ``spec`` and every ``field: message`` problem found
    before it is built: the team, the settings the algorithm does not read, the ``actor_critic`` keys."""
    algorithm = spec.algorithm
    if algorithm == "grpo" and len(agents) != 1:
        return {}, [f"trainer.algorithm: 'grpo' is the single-agent case; this team has {len(agents)} agents "
                    f"(use 'magrpo')"]
    problems = centralized_team_problems(agents, algorithm) if is_centralized(algorithm, spec.collaboration_mode) else []
    if problems:
        return {}, problems[:1]
    critics = has_critics(algorithm, spec.rl_algorithm)
    if critics and any(a.lora_rank is not None for a in agents):
        return {}, [f"agents: LoRA (lora_rank) trains MAGRPO-family teams; {algorithm} critics need full "
                    f"models: remove lora_rank or use magrpo"]
    fields = set(config_class(algorithm).field_names())
    defaults = TrainerSpec()
    problems = [f"trainer.{name}: not used by {algorithm}; leave it at its default ({getattr(defaults, name)!r}) "
                f"or choose an algorithm that reads it"
                for name in unused_settings(algorithm) if getattr(spec, name) != getattr(defaults, name)]
    problems += fsdp_problems(spec, algorithm=algorithm, lora=[a.lora_rank is not None for a in agents])
    values: dict[str, Any] = {name: getattr(spec, name) for name in read_settings(algorithm)}
    if values.get("collaboration_mode", "") is None:
        del values["collaboration_mode"]  # empty: the config class's own (centralized for centralized_magrpo)
    if critics:
        given = spec.actor_critic.given()
        unknown = sorted(set(given) - fields)
        if unknown:
            known = [n for n in type(spec.actor_critic).model_fields if n in fields]
            problems.append(f"trainer.actor_critic: unknown settings {unknown} for {algorithm}; known: "
                            f"{', '.join(known)}")
        values.update(given)
    elif algorithm in ALGORITHM_BASELINES:
        values["advantage_mode"] = spec.advantage_mode or ALGORITHM_BASELINES[algorithm]  # empty: baseline
    values.update(team_settings(spec, agents))
    return values, problems
