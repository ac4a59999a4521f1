"""``SystemSpec``: the validated form of ``RunConfig.system`` (torch-free, for the CLI, the form and jobs).

Example (YAML)::

    system:
      trainers:
        - {name: planner, agents: [first]}
        - {name: writer, agents: [second], trainer: {agent_learning_rate: 1.0e-4}}
      schedule: {type: alternating, phase_length: 2}
      rounds: 8

Each trainer group names agents of ``RunConfig.agents`` (every agent in exactly one group) and may
override fields of ``RunConfig.trainer`` for its own trainer. Errors name the field
(``system.schedule.phase_length``) and say how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.schema.errors import ConfigError, format_validation_error

TrainerT = TypeVar("TrainerT", bound=BaseModel, covariant=True)


class AgentParts(Protocol):
    """What the system check reads of one agent of a run config."""

    @property
    def name(self) -> str: ...
    @property
    def share_weights_with(self) -> str | None: ...


class RunParts(Protocol[TrainerT]):
    """What the system check reads of a run config. :class:`engine.schema.run_config.RunConfig` holds a
    system section, so this module names the parts it reads instead of importing the run config."""

    @property
    def system(self) -> Any: ...
    @property
    def agents(self) -> Sequence[AgentParts]: ...
    @property
    def trainer(self) -> TrainerT: ...

SYSTEM_ALGORITHMS = ("magrpo", "grpo", "mareinforce", "maremax", "marloo")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrainerGroupSpec(_Strict):
    """One trainer of the system: a name, its agents and overrides of the run's trainer settings."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$",
                      description="Trainer name used in metric keys (trainer/<name>/...) and checkpoints.")
    agents: list[str] = Field(min_length=1, description="Names of the run's agents this trainer trains.")
    trainer: dict[str, Any] = Field(default_factory=dict,
                                    description="Overrides of the run's trainer fields for this trainer.")


class AllTogetherSpec(_Strict):
    type: Literal["all_together"] = "all_together"


class AlternatingSpec(_Strict):
    type: Literal["alternating"] = "alternating"
    phase_length: int = Field(1, ge=1, description="Rounds each trainer trains before the other takes over.")
    order: list[str] | None = Field(None, description="Which trainer starts (default: the listed order).")


class RoundRobinSpec(_Strict):
    type: Literal["round_robin"] = "round_robin"
    phase_length: int = Field(1, ge=1, description="Rounds each trainer trains before the next takes over.")
    order: list[str] | None = Field(None, description="Trainer order (default: the listed order).")


class EveryKSpec(_Strict):
    type: Literal["every_k"] = "every_k"
    every: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="Trainer -> update after every k-th round (unlisted: every round).")


class CustomSpec(_Strict):
    type: Literal["custom"] = "custom"
    function: str = Field(min_length=3, description="'package.module:function' taking (round, names).")


ScheduleSpec = Annotated[
    AllTogetherSpec | AlternatingSpec | RoundRobinSpec | EveryKSpec | CustomSpec, Field(discriminator="type")
]


class SystemSpec(_Strict):
    """Several coordinated trainers (see the module docstring)."""

    trainers: list[TrainerGroupSpec] = Field(min_length=1, description="The trainers and their agents.")
    schedule: ScheduleSpec = Field(default_factory=AllTogetherSpec, description="Which trainers update when.")
    rounds: int | None = Field(None, ge=1, description="Rounds to play (capped by the run's max_steps; default: "
                                                       "max_steps, else num_train_epochs passes over the data).")
    items_per_round: int = Field(1, ge=1, description="Dataset items played per round.")
    transcripts_per_round: int = Field(2, ge=0, description="Joint episodes recorded per round.")
    checkpoint_interval: int = Field(0, ge=0, description="Checkpoint the whole system every N rounds "
                                                          "(0 = only at the end).")


def parse_system_spec(config: RunParts, task_modules: tuple[str, ...] = ()) -> SystemSpec:
    """Validate ``config.system`` against the run's agents; :class:`ConfigError` names each bad field. A
    custom schedule's function must come from a module of ``task_modules`` (the operator's allowlist)."""
    if config.system is None:
        raise ConfigError("system: this run config has no system section")
    try:
        spec = SystemSpec.model_validate(config.system)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, SystemSpec, "system")) from None
    agent_names = [a.name for a in config.agents]
    problems: list[str] = []
    group_names = [g.name for g in spec.trainers]
    if len(set(group_names)) != len(group_names):
        problems.append(f"system.trainers: trainer names must be unique, got {group_names}")
    owner: dict[str, str] = {}
    for i, group in enumerate(spec.trainers):
        for name in group.agents:
            if name not in agent_names:
                problems.append(f"system.trainers.{i}.agents: {name!r} is not an agent of this run ({agent_names})")
            elif name in owner:
                problems.append(f"system.trainers.{i}.agents: {name!r} is already trained by {owner[name]!r}; "
                                f"give each agent to one trainer")
            else:
                owner[name] = group.name
        for j, agent in enumerate(config.agents):
            if agent.name in group.agents and agent.share_weights_with and agent.share_weights_with not in group.agents:
                problems.append(f"agents.{j}.share_weights_with: {agent.name!r} shares weights with "
                                f"{agent.share_weights_with!r} of another trainer; a frozen trainer's weights would "
                                f"change, so share weights only inside one trainer")
        problems += _group_trainer_problems(config, group, i)
    missing = [n for n in agent_names if n not in owner]
    if missing:
        problems.append(f"system.trainers: agents {missing} belong to no trainer; list each agent in one trainer")
    problems += _schedule_problems(spec, group_names, task_modules)
    if problems:
        raise ConfigError("\n".join(problems))
    return spec


def group_trainer_spec(config: RunParts[TrainerT], group: TrainerGroupSpec) -> TrainerT:
    """The run's trainer settings with the group's overrides applied (validated)."""
    return type(config.trainer).model_validate({**config.trainer.model_dump(), **group.trainer})


def _group_trainer_problems(config: RunParts, group: TrainerGroupSpec, index: int) -> list[str]:
    where = f"system.trainers.{index}.trainer"
    try:
        spec = group_trainer_spec(config, group)
    except ValidationError as exc:
        return format_validation_error(exc, type(config.trainer), where).splitlines()
    problems = []
    if spec.algorithm not in SYSTEM_ALGORITHMS:
        problems.append(f"{where}.algorithm: {spec.algorithm!r} cannot be driven by a system; "
                        f"use one of {list(SYSTEM_ALGORITHMS)}")
    rules = system_trainer_problems({group.name: spec}, config.trainer.num_generations)
    problems += [f"{where}.{field}: {message}" for _, field, message in rules]
    return problems


def system_trainer_problems(trainers: Mapping[str, Any], num_generations: int) -> list[tuple[str, str, str]]:
    """``(trainer, field, message)`` for each setting of a system's trainers (name -> its settings: a
    trainer section or a config) that a system cannot drive: it plays one turn per round and pairs
    sample j of every trainer, so each is single-turn, aligned and samples the run's ``num_generations``.
    The one check of these rules, for run configs (:func:`parse_system_spec`) and for
    :class:`engine.systems.System`."""
    problems = []
    for name, settings in trainers.items():
        if settings.num_turns != 1:
            problems.append((name, "num_turns", "a system plays one turn per round; set 1 (multi-turn "
                                                "self-play works with a single trainer and a transition)"))
        if settings.joint_mode != "aligned":
            problems.append((name, "joint_mode", "a system pairs sample j of every trainer; set 'aligned'"))
        if settings.num_generations != num_generations:
            problems.append((name, "num_generations", f"every trainer must sample as many completions as the "
                                                      f"run ({num_generations}); remove the override"))
    return problems


def schedule_problems(order: Sequence[str] | None, every: Mapping[str, int] | None, names: Sequence[str], *,
                      alternating: bool) -> list[tuple[str, str]]:
    """``(field, message)`` for each way a schedule does not fit the trainers ``names``: an ``order``
    lists each trainer once, ``every`` names trainers only, an alternating schedule has two trainers.
    The one check of these rules, for run configs and for :func:`engine.systems.schedule.check_schedule`."""
    names = list(names)
    problems = []
    if order is not None:
        order = list(order)
        unknown = [n for n in order if n not in names]
        missing = [n for n in names if n not in order]
        if unknown:
            problems.append(("order", f"unknown trainers {unknown}; the trainers are {names}"))
        if missing:
            problems.append(("order", f"leaves out trainers {missing}; list each trainer once ({names})"))
        if len(set(order)) != len(order):
            problems.append(("order", f"lists a trainer twice ({order}); list each trainer once ({names})"))
    if alternating and len(names) != 2:
        problems.append(("type", f"'alternating' needs exactly 2 trainers, got {len(names)}; "
                                 f"use 'round_robin'"))
    unknown = [n for n in every or {} if n not in names]
    if unknown:
        problems.append(("every", f"unknown trainers {unknown}; the trainers are {names}"))
    return problems


def _schedule_problems(spec: SystemSpec, names: list[str], task_modules: tuple[str, ...]) -> list[str]:
    schedule = spec.schedule
    order = schedule.order if isinstance(schedule, (AlternatingSpec, RoundRobinSpec)) else None
    every = schedule.every if isinstance(schedule, EveryKSpec) else None
    rules = schedule_problems(order, every, names, alternating=isinstance(schedule, AlternatingSpec))
    problems = [f"system.schedule.{field}: {message}" for field, message in rules]
    if isinstance(schedule, CustomSpec):
        from engine.permissions.task_modules import schedule_function_problem  # torch-free

        problem = schedule_function_problem(schedule.function, task_modules)
        if problem is not None:
            problems.append(f"system.schedule.function: {problem}")
    return problems
