"""From a validated :class:`engine.spec.RunConfig` with ``trainer.algorithm`` ``iac``/``maac`` to a trainer.

Shared fields of ``TrainerSpec`` map onto :class:`IACConfig`/:class:`MAACConfig` by name. The
actor-critic-only settings (``critic_type``, ``critic_learning_rate``, ``value_clip_range``,
``value_loss_coef``, ``use_separate_critic``, head widths, ``critic_devices``) come from an
``actor_critic`` mapping on the trainer spec when it has one, else keep CoMLRL's defaults. MAGRPO
settings that actor-critic does not use are refused when changed from their defaults, so a form
never silently ignores a choice.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from engine.actor_critic.config import IACConfig, MAACConfig
from engine.actor_critic.iac import IACTrainer
from engine.actor_critic.maac import MAACTrainer
from engine.build import train_into_folder
from engine.formatting import template_formatter
from engine.sinks.base import Sink
from engine.spec import AgentSpec, ConfigError, RunConfig, TrainerSpec
from engine.trainer import TrainResult

# TrainerSpec fields with no meaning for actor-critic (refused unless left at their defaults)
_MAGRPO_ONLY = ("joint_mode", "turn_order", "advantage_mode", "per_agent_normalization", "clip_epsilon",
                "num_inner_epochs", "reference_kl_mode", "lr_scheduler", "warmup_steps", "micro_batch_size",
                "eval_samples_per_item")
_SPEC_ONLY = {"algorithm", "device", "torch_dtype"}


def actor_critic_config(spec: TrainerSpec, agents: list[AgentSpec]) -> IACConfig | MAACConfig:
    """The IACConfig/MAACConfig for a TrainerSpec (see the module docstring)."""
    if spec.algorithm not in ("iac", "maac"):
        raise ConfigError(f"trainer.algorithm: {spec.algorithm!r} is not an actor-critic method (iac, maac)")
    defaults = TrainerSpec()
    for name in _MAGRPO_ONLY:
        if getattr(spec, name) != getattr(defaults, name):
            raise ConfigError(f"trainer.{name}: not used by {spec.algorithm}; leave it at its default "
                              f"({getattr(defaults, name)!r}) or use a MAGRPO-family algorithm")
    cls = IACConfig if spec.algorithm == "iac" else MAACConfig
    names = {f.name for f in fields(cls)}
    values: dict[str, Any] = {k: v for k, v in spec.model_dump().items()
                              if k in names and k not in _SPEC_ONLY and k not in _MAGRPO_ONLY}
    extra = dict(getattr(spec, "actor_critic", None) or {})
    unknown = sorted(set(extra) - names)
    if unknown:
        raise ConfigError(f"trainer.actor_critic: unknown settings {unknown}; known: {sorted(names)}")
    values.update(extra)
    values["num_agents"] = len(agents)
    values["agent_names"] = [a.name for a in agents]
    if spec.parallel_training == "mp":
        values["agent_devices"] = spec.agent_devices
    else:
        first = next((a.device for a in agents if a.device), None)
        values["agent_devices"] = [first or spec.device]
    values["model_config"] = {"torch_dtype": None if spec.torch_dtype == "auto" else spec.torch_dtype}
    try:
        return cls(**values)
    except ValueError as exc:
        raise ConfigError(f"trainer.{exc}") from None


def load_team_models(agents: list[AgentSpec], devices: list[str], dtype: Any) -> tuple[list[Any], list[Any]]:
    """Models and tokenizers per agent; ``share_weights_with`` reuses an earlier agent's objects."""
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
            model, tok = load_agent(agent.model, tokenizer=agent.tokenizer, device=devices[i if len(devices) > 1 else 0],
                                    dtype=dtype, model_kwargs=dict(agent.model_kwargs))
            models.append(model)
            tokenizers.append(tok)
        by_name[agent.name] = i
    return models, tokenizers


def build_actor_critic_trainer(config: RunConfig, *, output_dir: str | Path | None,
                               sink: Sink | None = None) -> IACTrainer | MAACTrainer:
    """Agents + task + IAC/MAAC trainer for a run config."""
    from engine.tasks import build_task

    cfg = actor_critic_config(config.trainer, config.agents)
    task = build_task(config.task.name, dict(config.task.params), len(config.agents))
    if cfg.num_turns > 1 and task.external_transition is None:
        raise ConfigError(f"trainer.num_turns: task {config.task.name!r} is single-turn (no transition); set 1")
    if task.max_turns is not None and cfg.num_turns > task.max_turns:
        raise ConfigError(f"trainer.num_turns: task {config.task.name!r} supports at most {task.max_turns} turns")
    devices = cfg.agent_devices if isinstance(cfg.agent_devices, list) else [cfg.agent_devices or "cpu"]
    models, tokenizers = load_team_models(config.agents, devices, (cfg.model_config or {}).get("torch_dtype"))
    cls = IACTrainer if isinstance(cfg, IACConfig) else MAACTrainer
    return cls(
        agents=models, tokenizer=tokenizers, train_dataset=task.train_dataset, eval_dataset=task.eval_dataset,
        reward_func=task.reward_func, external_transition=task.external_transition, eval_logger=task.eval_logger,
        eval_aggregator=task.eval_aggregator, args=cfg, sink=sink,
        formatters=[template_formatter(a.prompt_template) if a.prompt_template else task.formatters[i]
                    for i, a in enumerate(config.agents)],
        agent_names=[a.name for a in config.agents],
        agent_learning_rates=[a.learning_rate for a in config.agents],
        agent_generation=[{"max_new_tokens": a.max_new_tokens, "temperature": a.temperature, "top_p": a.top_p,
                           "top_k": a.top_k} for a in config.agents],
        system_prompts=[a.system_prompt for a in config.agents], output_dir=output_dir,
    )


def run_actor_critic(config: RunConfig, *, output_dir: str | Path, sink: Sink,
                     resume_from: str | Path | None = None) -> TrainResult:
    """Train an IAC/MAAC run end to end: ``config.yaml``, ``checkpoints/``, and on completion ``model/``."""
    return train_into_folder(config, build_actor_critic_trainer, output_dir=output_dir, sink=sink,
                             resume_from=resume_from)
