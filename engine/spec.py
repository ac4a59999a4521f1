"""The run config: the one schema shared by `cooplab train`, the dashboard form and the job executor.

It is plain pydantic (no torch), so the dashboard and the job client can validate a config without
loading the training stack. Validation errors name the offending field (``agents.1.learning_rate``).
The engine turns a validated :class:`RunConfig` into agents, a task and a trainer in
:mod:`engine.build`.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

# The longest completion a config may ask for; a model's own context (checked by engine.preflight
# before a run is queued) is usually much smaller.
MAX_NEW_TOKENS_LIMIT = 131_072

Algorithm = Literal["magrpo", "grpo", "mareinforce", "maremax", "marloo", "iac", "maac"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class AgentSpec(_Strict):
    """One agent of the team: its own causal LM, tokenizer, optimizer and sampling settings."""

    name: str = Field("agent", min_length=1, description="Role name shown in transcripts and metrics.")
    model: str = Field(
        "builtin:tiny-llama",
        min_length=1,
        description="Hugging Face id, local folder, or a built-in offline model "
        "(builtin:tiny-llama, builtin:tiny-qwen2, builtin:smollm2-135m).",
    )
    tokenizer: str | None = Field(None, description="Tokenizer source; defaults to the model's own.")
    share_weights_with: str | None = Field(
        None, description="Name of an earlier agent whose weights this agent shares (own optimizer state)."
    )
    system_prompt: str | None = Field(None, description="System message when the tokenizer has a chat template.")
    prompt_template: str | None = Field(
        None, description="Python format string over the dataset item, e.g. 'Write a helper for: {prompt}'."
    )
    device: str | None = Field(None, description="Device for this agent (cpu, cuda:0, ...); defaults to the run's.")
    learning_rate: float | None = Field(None, gt=0, description="AdamW learning rate; defaults to the trainer's.")
    temperature: float | None = Field(None, gt=0, description="Sampling temperature; defaults to the trainer's.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling; defaults to the trainer's.")
    top_k: int | None = Field(None, ge=0, description="Top-k sampling (0 = off); defaults to the trainer's.")
    max_new_tokens: int | None = Field(
        None, ge=1, le=MAX_NEW_TOKENS_LIMIT, description="Completion length cap; defaults to the trainer's."
    )
    model_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra from_pretrained keyword arguments (dtype, attn_implementation)."
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
    def _allowed_task(cls, value: str) -> str:
        from engine.tasks.registry import task_name_problem  # torch-free; imports no user code

        problem = task_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class TrainerSpec(_Strict):
    """Trainer settings. Field names and defaults follow CoMLRL's MAGRPOConfig where it has them
    (except ``num_turns`` 1 and ``logging_steps`` 1, friendlier for a form); the rest are CoopLab's."""

    algorithm: Algorithm = Field("magrpo", description="magrpo/grpo (mean baseline), mareinforce (raw), "
                                 "maremax (max), marloo (rloo), iac, maac.")
    num_train_epochs: int = Field(20, ge=1, description="Passes over the training set.")
    max_steps: int | None = Field(
        None, ge=1, description="Train exactly this many steps, cycling through the data (overrides epochs)."
    )
    agent_learning_rate: float = Field(5e-6, gt=0, description="Default AdamW learning rate per agent.")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    num_generations: int = Field(
        4, ge=1, description="K: samples per agent per node of the rollout tree (>= 2 for the MAGRPO family)."
    )
    max_new_tokens: int = Field(
        256, ge=1, le=MAX_NEW_TOKENS_LIMIT, description="Completion length cap (tokens; less than the model's context)."
    )
    temperature: float = Field(0.6, gt=0, description="Sampling temperature.")
    top_p: float = Field(0.6, gt=0, le=1, description="Nucleus sampling: keep the smallest set of tokens with this mass.")
    top_k: int | None = Field(50, ge=0, description="Top-k sampling (0 or empty = off). Tiny models learn only with it on.")
    num_turns: int = Field(1, ge=1, description="Turns per episode; >1 needs a task with a transition.")
    discount: float = Field(1.0, ge=0, le=1, description="Discount of later-turn rewards in returns.")
    joint_mode: Literal["aligned", "cross"] = Field("aligned", description="K joint actions or all K^N.")
    turn_order: Literal["simultaneous", "sequential"] = Field(
        "simultaneous", description="sequential: agent i also sees the same-turn replies of agents < i."
    )
    early_termination_threshold: float | None = Field(
        None, description="Stop expanding a branch when its node's mean reward exceeds this (off when empty)."
    )
    external_prompt_passthrough: bool = Field(
        False, description="Use the transition's prompts as they are instead of re-applying the formatters."
    )
    advantage_mode: Literal["mean", "raw", "max", "rloo"] | None = Field(
        None, description="Baseline among siblings; defaults to the algorithm's."
    )
    advantage_normalization: bool = Field(True, description="z-normalise advantages within each node's group.")
    per_agent_normalization: bool = Field(
        False, description="Also z-normalise each agent's advantages over its whole update batch."
    )
    loss_type: Literal["seq_sum", "token_mean"] = Field(
        "seq_sum", description="seq_sum: sum of token log-probs (CoMLRL); token_mean: average per completion token."
    )
    clip_epsilon: float | None = Field(None, gt=0, description="PPO-style ratio clipping (off when empty).")
    num_inner_epochs: int = Field(1, ge=1, description="Updates over the same rollouts (needs clipping).")
    reference_kl_enabled: bool = Field(False, description="Penalise divergence from the initial model (k3 KL).")
    reference_kl_coef: float = Field(0.1, ge=0, description="Weight of the reference KL.")
    reference_kl_mode: Literal["reward", "loss"] = Field(
        "reward", description="reward: subtract the KL from returns (CoMLRL); loss: add it to the loss."
    )
    max_grad_norm: float | None = Field(1.0, gt=0, description="Clip each agent's gradient norm (off when empty).")
    lr_scheduler: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="Learning-rate schedule after warmup."
    )
    warmup_steps: int = Field(0, ge=0, description="Linear warmup steps.")
    rollout_buffer_size: int = Field(2, ge=1, description="Node samples per agent collected before an update.")
    train_batch_size: int | None = Field(None, ge=1, description="Nodes per optimizer step (empty = buffer size).")
    items_per_step: int = Field(
        1, ge=1, description="Dataset items sampled together in one step (faster; 1 = CoMLRL's one item at a time)."
    )
    micro_batch_size: int | None = Field(
        None, ge=1, description="Sequences per training forward pass (empty = whole mini-batch)."
    )
    shuffle: bool = Field(False, description="Shuffle the training set each epoch (seeded).")
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory in the update.")
    parallel_training: Literal["none", "mp"] = Field(
        "none", description="mp: each agent on its own device (a GPU, or 'cpu' for cores of its own), "
        "generating and updating concurrently."
    )
    agent_devices: list[str] | None = Field(None, description="Device per agent for mp (one entry is broadcast).")
    reference_devices: list[str] | None = Field(None, description="Devices of the reference models.")
    device: str = Field("cpu", description="Default device for every agent.")
    torch_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "float32", description="Model dtype (bfloat16 on GPU halves memory)."
    )
    logging_steps: int = Field(1, ge=1, description="Report metrics every N steps.")
    eval_interval: int = Field(16, ge=0, description="Evaluate every N steps (0 = never).")
    eval_num_samples: int = Field(4, ge=1, description="Evaluation items per evaluation.")
    eval_samples_per_item: int = Field(1, ge=1, description="Completions per eval item (>1 enables pass@k).")
    eval_greedy: bool = Field(False, description="Greedy decoding in evaluation.")
    checkpoint_interval: int = Field(0, ge=0, description="Checkpoint every N steps (0 = only at the end).")
    checkpoint_total_limit: int | None = Field(3, ge=1, description="Checkpoints kept (oldest removed).")
    transcripts_per_step: int = Field(2, ge=0, description="Sampled episodes recorded per step.")
    seed: int = Field(0, description="Seeds everything; a seeded CPU run reproduces.")
    fast_decode: bool = Field(
        True, description="Sample Llama/Qwen2 models with the exact fast token step (falls back by itself)."
    )
    actor_critic: dict[str, Any] = Field(
        default_factory=dict,
        description="iac/maac only: critic_type (v|q), critic_learning_rate, value_clip_range, value_loss_coef, "
        "use_separate_critic, critic_value_head_hidden_dim, value_head_hidden_dim, critic_devices.",
    )

    @model_validator(mode="after")
    def _check_combinations(self) -> TrainerSpec:
        if self.num_inner_epochs > 1 and self.clip_epsilon is None:
            raise ValueError("num_inner_epochs > 1 needs clip_epsilon (set e.g. 0.2) to keep updates stable")
        if self.parallel_training == "mp" and not self.agent_devices:
            raise ValueError("parallel_training='mp' needs agent_devices, e.g. ['cuda:0', 'cuda:1']")
        if self.turn_order == "sequential" and self.joint_mode == "cross":
            raise ValueError("turn_order='sequential' works with joint_mode='aligned' only")
        return self

    @field_validator("num_generations")
    @classmethod
    def _siblings_for_group_baselines(cls, value: int, info: ValidationInfo) -> int:
        algorithm = info.data.get("algorithm", "magrpo")
        if value < 2 and algorithm not in ("iac", "maac"):
            raise ValueError(f"must be >= 2 for {algorithm} (the group baseline needs siblings)")
        return value

    @field_validator("actor_critic")
    @classmethod
    def _actor_critic_only(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        algorithm = info.data.get("algorithm", "magrpo")
        if value and algorithm not in ("iac", "maac"):
            raise ValueError(f"applies to iac/maac only, not to {algorithm}")
        return value


class RunConfig(_Strict):
    """A whole experiment: the team, the task and the trainer."""

    name: str = Field("experiment", min_length=1)
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    agents: list[AgentSpec] = Field(min_length=1)
    task: TaskSpec = Field(default_factory=TaskSpec)
    trainer: TrainerSpec = Field(default_factory=TrainerSpec)
    system: dict[str, Any] | None = Field(None, description="Several coordinated trainers (see docs/systems.md).")

    @model_validator(mode="after")
    def _check_team(self) -> RunConfig:
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
        if self.system is not None:
            from engine.systems.spec import parse_system_spec  # torch-free; imports this module

            parse_system_spec(self)
        return self


class ConfigError(ValueError):
    """A run config that cannot be used; the message names each bad field and how to fix it."""


def format_validation_error(error: ValidationError) -> str:
    """One line per problem: ``field.path: message``."""
    lines = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "config"
        message = item["msg"]
        if item["type"] == "value_error":
            message = message.removeprefix("Value error, ")
            if not item["loc"] and ": " in message.split("\n", 1)[0]:
                lines.append(message)  # the message already names its field(s)
                continue
        if item["type"] == "extra_forbidden":
            allowed = _allowed_fields(item["loc"])
            close = difflib.get_close_matches(str(item["loc"][-1]), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            message = f"unknown field; {hint}allowed here: {', '.join(allowed)}"
        lines.append(f"{where}: {message}")
    return "\n".join(lines)


def _allowed_fields(loc: tuple) -> list[str]:
    """The field names of the section that holds ``loc`` (for 'unknown field' messages)."""
    model: type[BaseModel] = RunConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[str(part)].annotation
        inner = [a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type)]
        nested = next((a for a in inner if issubclass(a, BaseModel)), None)
        if nested is None:
            break
        model = nested
    return sorted(model.model_fields)


def parse_run_config(data: dict[str, Any]) -> RunConfig:
    """Validate a plain dict into a :class:`RunConfig`, raising :class:`ConfigError` naming the fields."""
    if not isinstance(data, dict):
        raise ConfigError(f"a run config must be a mapping of sections, got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


def load_run_config(path: str | Path) -> RunConfig:
    """Read a YAML or JSON run config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML/JSON: {exc}") from None
    return parse_run_config(data or {})


def dump_run_config(config: RunConfig) -> str:
    """YAML text of a config, the format `cooplab train` and the dashboard import/export use."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
