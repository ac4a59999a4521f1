"""The run config: the one schema shared by `cooplab train`, the dashboard form and the job executor.

It is plain pydantic (no torch), so the dashboard and the job client can validate a config without
loading the training stack. Validation errors name the offending field (``agents.1.learning_rate``).
The engine turns a validated :class:`RunConfig` into agents, a task and a trainer in
:mod:`engine.build.run`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo

from engine.schema.derive import agent_override, run_config_settings, schema_fields
from engine.schema.errors import ConfigError, format_validation_error
from engine.schema.rules import team_problems
from engine.schema.run_config_sections import (
    _MORE,
    _AgentIdentity,
    _GivenOnly,
    _Strict,
    _TrainerRules,
)
from engine.schema.safe_yaml import YamlLimitError, load_yaml_file
from engine.schema.system_spec import SystemSpec, parse_system_spec

ACTOR_CRITIC_SETTINGS = run_config_settings("actor_critic")
LORA_SETTINGS = run_config_settings("agent")


# An agent's own value of a trainer setting (shown in the grid of its row in the experiment form):
# field -> (catalog setting: its type and bounds, help). Empty means the trainer's value.
AGENT_OVERRIDES = {
    "device": ("device", "Device for this agent (cpu, cuda:0, ...); defaults to the run's."),
    "learning_rate": ("agent_learning_rate", "AdamW learning rate; defaults to the trainer's."),
    "temperature": ("temperature", "Sampling temperature; defaults to the trainer's."),
    "top_p": ("top_p", "Nucleus sampling; defaults to the trainer's."),
    "top_k": ("top_k", "Top-k sampling (0 = off); defaults to the trainer's."),
    "max_new_tokens": ("max_new_tokens", "Completion length cap; defaults to the trainer's."),
}

if TYPE_CHECKING:  # the same class as the type checker reads it (written from the built one)
    from engine.schema.run_config_types import AgentSpec
else:
    AgentSpec = create_model(
        "AgentSpec",
        __base__=_AgentIdentity,
        __module__=__name__,
        __doc__="One agent of the team: its own causal LM, tokenizer, optimizer and sampling settings, and "
                "optionally a LoRA adapter (lora_* settings, declared in engine.schema.catalog).",
        **{name: (agent_override(setting), Field(None, description=text, json_schema_extra={"form": "main"}))
           for name, (setting, text) in AGENT_OVERRIDES.items()},
        model_kwargs=(dict[str, Any], Field(
            default_factory=dict, description="Extra from_pretrained keyword arguments (dtype, attn_implementation).",
            json_schema_extra=_MORE,
        )),
        **{name: (annotation, FieldInfo.merge_field_infos(info, json_schema_extra=_MORE))
           for name, (annotation, info) in schema_fields(LORA_SETTINGS).items()},
    )


class TaskSpec(_Strict):
    """Which task to train on: a registered name, an installed plugin (``cooplab.tasks`` entry point) or
    ``package.module:factory`` in a module on the operator's allowlist, with its parameters."""

    name: str = Field(
        "quickstart", min_length=1,
        description="Built-in task name, installed plugin task, or 'package.module:factory' from an allowed module.",
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Task parameters (validated by the task).")

    @field_validator("name")
    @classmethod
    def _allowed_task(cls, value: str, info: ValidationInfo) -> str:
        from engine.schema.task_registry import task_name_problem  # imports no user code

        problem = task_name_problem(value, task_modules_of(info))
        if problem is not None:
            raise ValueError(problem)
        return value


if TYPE_CHECKING:  # the same class as the type checker reads it (written from the built one)
    from engine.schema.run_config_types import ActorCriticSection
else:
    ActorCriticSection = create_model(
        "ActorCriticSection",
        __base__=_GivenOnly,
        __module__=__name__,
        __doc__="The iac/maac-only settings (also marlhf's with rl_algorithm iac/maac); unset ones keep the "
                "algorithm's own defaults (IACConfig/MAACConfig/MARLHFConfig).",
        **schema_fields(ACTOR_CRITIC_SETTINGS),
    )


# The run config's trainer section: the catalog's settings a run config holds there ("trainer", "build"), in
# catalog order (the form's main settings first). Names and defaults follow CoMLRL's MAGRPOConfig except
# num_turns 1 and logging_steps 1 (friendlier for a form) and advantage_mode and collaboration_mode empty
# (the algorithm's: its baseline; centralized for centralized_magrpo, decentralized otherwise, see
# engine.schema.collaboration), and seed 0, never empty: a run config records its seed, so its runs
# reproduce (the config classes' empty seed continues torch's global RNG, as CoMLRL does). An algorithm
# refuses a changed "trainer" setting it does not read (engine.schema.algorithms.unused_settings).
TRAINER_SETTINGS = run_config_settings("trainer", "build")
TRAINER_DEFAULTS = {"num_turns": 1, "logging_steps": 1, "advantage_mode": None, "collaboration_mode": None,
                    "seed": 0}
TRAINER_OPTIONAL = ("collaboration_mode",)  # None is the algorithm's value (advantage_mode's type has None already)
TRAINER_REQUIRED = ("seed",)  # recorded: None is refused

if TYPE_CHECKING:  # the same class as the type checker reads it (written from the built one)
    from engine.schema.run_config_types import TrainerSpec
else:
    TrainerSpec = create_model(
        "TrainerSpec",
        __base__=_TrainerRules,
        __module__=__name__,
        __doc__="Trainer settings of a run config (each declared once in engine.schema.catalog).",
        **schema_fields(TRAINER_SETTINGS, TRAINER_DEFAULTS, TRAINER_OPTIONAL, TRAINER_REQUIRED),
        actor_critic=(ActorCriticSection, Field(default_factory=ActorCriticSection,
                                                description="iac/maac (and marlhf with rl_algorithm iac/maac) only: the "
                                                            "critic's settings.")),
    )


class RetrySpec(_Strict):
    """The job's retry policy: read by the job layer (``jobs.retries``), never by training (``cooplab train``
    ignores it). A run that ends ``lost`` (its worker died or froze past the heartbeat timeout) gets a new
    attempt from its last checkpoint while attempts remain; see docs/jobs.md."""

    max_attempts: int = Field(1, ge=1, le=20, description="Attempts in all, the first included: a run lost "
                              "before its last attempt is queued again from its last checkpoint (from the "
                              "start when it saved none); 1 never retries.")


class RunConfig(_Strict):
    """A whole experiment: the team, the task and the trainer (and, for jobs, the retry policy)."""

    name: str = Field("experiment", min_length=1)
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    agents: list[AgentSpec] = Field(min_length=1)
    task: TaskSpec = Field(default_factory=TaskSpec)
    trainer: TrainerSpec = Field(default_factory=TrainerSpec)
    system: SystemSpec | None = Field(None, description="Several coordinated trainers (see docs/systems.md).")
    retry: RetrySpec | None = Field(None, description="Jobs only: how often a lost run is queued again from its "
                                    "last checkpoint (see docs/jobs.md).")

    @model_serializer(mode="wrap")
    def _without_unset_retry(self, handler: Any) -> dict[str, Any]:
        # A config without a retry policy is written as before (no "retry: null" in stored configs and YAML).
        data = handler(self)
        if isinstance(data, dict) and data.get("retry") is None:
            data.pop("retry", None)
        return data

    @model_validator(mode="after")
    def _check_team(self, info: ValidationInfo) -> RunConfig:
        names = [a.name for a in self.agents]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(dupes)}")
        for i, agent in enumerate(self.agents):
            target = agent.share_weights_with
            if target is not None and target not in names[:i]:
                raise ValueError(
                    f"agents.{i}.share_weights_with={target!r} must name an earlier agent ({names[:i] or 'none'})"
                )
            if target is not None and (agent.lora_rank is None) != (self.agents[names.index(target)].lora_rank is None):
                raise ValueError(
                    f"agents.{i}.lora_rank: agents sharing weights must all use LoRA (one frozen base, an adapter "
                    f"each) or none; set lora_rank on both {agent.name!r} and {target!r}, or on neither"
                )
        lora = [a.name for a in self.agents if a.lora_rank is not None]
        if self.trainer.rollout_dtype not in (None, "auto") and lora:
            raise ValueError(f"trainer.rollout_dtype: LoRA agents ({', '.join(lora)}) sample from their adapters on "
                             f"the frozen base and have no sampling copy; leave rollout_dtype empty, or set "
                             f"torch_dtype for the whole model")
        if self.system is not None:
            parse_system_spec(self, task_modules_of(info))
        else:
            for problem in team_problems(self.trainer.credit_assignment, len(self.agents)):
                raise ValueError(f"trainer.{problem}")
        return self


def task_modules_of(info: ValidationInfo) -> tuple[str, ...]:
    """The task module allowlist a validation runs under: ``context={"task_modules": ...}`` of
    ``RunConfig.model_validate`` (:func:`parse_run_config` passes it); empty when none is given."""
    context = info.context if isinstance(info.context, dict) else {}
    return tuple(context.get("task_modules") or ())


def parse_run_config(data: dict[str, Any], *, task_modules: tuple[str, ...] = ()) -> RunConfig:
    """Validate a plain dict into a :class:`RunConfig`, raising :class:`ConfigError` naming the fields.

    ``task_modules``: the operator's task module allowlist (``OperatorPermissions.task_modules``) that a
    ``package.module:factory`` task or a custom system schedule must come from; empty by default."""
    if not isinstance(data, dict):
        raise ConfigError(f"a run config must be a mapping of sections, got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data, context={"task_modules": tuple(task_modules)})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, RunConfig)) from None


def load_run_config(path: str | Path, *, task_modules: tuple[str, ...] = ()) -> RunConfig:
    """Read a YAML or JSON run config file (at most 1 MiB, aliases within :mod:`engine.schema.safe_yaml`'s limits)
    under the task module allowlist ``task_modules`` (see :func:`parse_run_config`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = load_yaml_file(path)  # within the size and alias limits of engine.schema.safe_yaml
    except YamlLimitError as exc:
        raise ConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML/JSON: {exc}") from None
    return parse_run_config(data or {}, task_modules=task_modules)


def dump_run_config(config: RunConfig) -> str:
    """YAML text of a config, the format `cooplab train` and the dashboard import/export use."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def agents_from_folders(data: dict[str, Any], folders: list[str | Path]) -> dict[str, Any]:
    """A copy of a run config's plain form with agent i's model (and tokenizer) read from ``folders[i]``:
    each folder is a whole model, so weight sharing and LoRA adapters are dropped from the agents (and a
    tiny built-in model's builder arguments)."""
    out = copy.deepcopy(data)
    for agent, folder in zip(out["agents"], folders, strict=True):
        if str(agent.get("model") or "").startswith("builtin:tiny-"):
            agent.pop("model_kwargs", None)  # 'size' and 'seed' built the tiny model; from_pretrained takes neither
        agent.update(model=str(folder), tokenizer=None, share_weights_with=None)
        for key in [k for k in agent if k.startswith("lora_")]:
            del agent[key]  # the defaults: no adapter
    return out
