"""From a validated :class:`engine.spec.RunConfig` to a running trainer.

``build_trainer`` loads the agents (sharing weights where ``share_weights_with`` says so), builds
the task, maps the ``TrainerSpec`` onto :class:`engine.config.MAGRPOConfig` and returns a
:class:`engine.trainer.MAGRPOTrainer`. ``run_training`` also writes the config next to the
checkpoints, trains, exports the final models and returns a :class:`TrainResult`. The CLI and the
job executor both call ``run_training``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.config import MAGRPOConfig
from engine.formatting import template_formatter
from engine.sinks.base import Sink
from engine.spec import AgentSpec, ConfigError, RunConfig, TrainerSpec, dump_run_config
from engine.trainer import MAGRPOTrainer, TrainResult

ACTOR_CRITIC = ("iac", "maac")
ALGORITHM_MODES = {"magrpo": "mean", "grpo": "mean", "mareinforce": "raw", "maremax": "max", "marloo": "rloo"}
# TrainerSpec fields that are not MAGRPOConfig fields (handled here)
_SPEC_ONLY = {"algorithm", "device", "torch_dtype", "advantage_mode", "actor_critic"}


def trainer_config(spec: TrainerSpec, agents: list[AgentSpec]) -> MAGRPOConfig:
    """The MAGRPOConfig for a TrainerSpec (names match; the algorithm picks the baseline)."""
    if spec.algorithm not in ALGORITHM_MODES:
        raise ConfigError(
            f"trainer.algorithm: {spec.algorithm!r} is an actor-critic method (engine.actor_critic, which "
            f"run_training uses for it); the MAGRPO trainer takes one of {sorted(ALGORITHM_MODES)}"
        )
    if spec.algorithm == "grpo" and len(agents) != 1:
        raise ConfigError(f"trainer.algorithm: 'grpo' is the single-agent case; this team has {len(agents)} agents "
                          f"(use 'magrpo')")
    values: dict[str, Any] = {k: v for k, v in spec.model_dump().items() if k not in _SPEC_ONLY}
    values["advantage_mode"] = spec.advantage_mode or ALGORITHM_MODES[spec.algorithm]
    values["num_agents"] = len(agents)
    values["agent_names"] = [a.name for a in agents]
    per_agent_devices = [a.device for a in agents]
    if spec.parallel_training == "mp":
        values["agent_devices"] = spec.agent_devices
    elif any(per_agent_devices):
        values["agent_devices"] = [per_agent_devices[0] or spec.device]
    else:
        values["agent_devices"] = [spec.device]
    values["model_config"] = {"torch_dtype": None if spec.torch_dtype == "auto" else spec.torch_dtype}
    try:
        return MAGRPOConfig(**values)
    except ValueError as exc:
        raise ConfigError(f"trainer.{exc}") from None


def _load_team(config: RunConfig, cfg: MAGRPOConfig) -> tuple[list[Any], list[Any]]:
    """Models and tokenizers per agent; an agent with ``share_weights_with`` gets the same objects."""
    from engine.models import load_agent

    models: list[Any] = []
    tokenizers: list[Any] = []
    by_name: dict[str, int] = {}
    dtype = (cfg.model_config or {}).get("torch_dtype")
    devices = cfg.agent_devices if isinstance(cfg.agent_devices, list) else [cfg.agent_devices or "cpu"]
    for i, agent in enumerate(config.agents):
        if agent.share_weights_with is not None:
            j = by_name[agent.share_weights_with]
            models.append(models[j])
            tokenizers.append(tokenizers[j])
        else:
            device = devices[i if len(devices) > 1 else 0]
            model, tok = load_agent(agent.model, tokenizer=agent.tokenizer, device=device, dtype=dtype,
                                    model_kwargs=dict(agent.model_kwargs))
            models.append(model)
            tokenizers.append(tok)
        by_name[agent.name] = i
    return models, tokenizers


def build_trainer(config: RunConfig, *, output_dir: str | Path | None, sink: Sink | None = None) -> MAGRPOTrainer:
    """Agents + task + trainer for a run config (see the module docstring)."""
    from engine.tasks import build_task

    cfg = trainer_config(config.trainer, config.agents)
    num_agents = len(config.agents)
    task = build_task(config.task.name, dict(config.task.params), num_agents)
    if cfg.num_turns > 1 and task.external_transition is None:
        raise ConfigError(f"trainer.num_turns: task {config.task.name!r} is single-turn (no transition); set 1")
    if task.max_turns is not None and cfg.num_turns > task.max_turns:
        raise ConfigError(f"trainer.num_turns: task {config.task.name!r} supports at most {task.max_turns} turns")
    formatters = [template_formatter(a.prompt_template) if a.prompt_template else task.formatters[i]
                  for i, a in enumerate(config.agents)]
    models, tokenizers = _load_team(config, cfg)
    return MAGRPOTrainer(
        agents=models,
        tokenizer=tokenizers,
        train_dataset=task.train_dataset,
        eval_dataset=task.eval_dataset,
        reward_func=task.reward_func,
        formatters=formatters,
        external_transition=task.external_transition,
        eval_logger=task.eval_logger,
        eval_aggregator=task.eval_aggregator,
        args=cfg,
        sink=sink,
        agent_names=[a.name for a in config.agents],
        agent_learning_rates=[a.learning_rate for a in config.agents],
        agent_generation=[{"max_new_tokens": a.max_new_tokens, "temperature": a.temperature, "top_p": a.top_p,
                           "top_k": a.top_k} for a in config.agents],
        system_prompts=[a.system_prompt for a in config.agents],
        eval_check=task.check,
        output_dir=output_dir,
    )


def run_training(config: RunConfig, *, output_dir: str | Path, sink: Sink,
                 resume_from: str | Path | None = None) -> TrainResult:
    """Train a run config end to end.

    Writes ``config.yaml``, checkpoints under ``checkpoints/`` and, when training completes, the
    final models under ``model/agent_{i}/``. ``resume_from`` is a checkpoint folder of an earlier
    attempt of the same config. A config with a ``system`` section goes to
    :func:`engine.systems.build.run_system`, the actor-critic algorithms (iac, maac) to
    :func:`engine.actor_critic.build.run_actor_critic`; both follow the same contract.
    """
    if config.system is not None:
        from engine.systems.build import run_system

        return run_system(config, output_dir=output_dir, sink=sink, resume_from=resume_from)
    if config.trainer.algorithm in ACTOR_CRITIC:
        from engine.actor_critic.build import run_actor_critic

        return run_actor_critic(config, output_dir=output_dir, sink=sink, resume_from=resume_from)
    return train_into_folder(config, build_trainer, output_dir=output_dir, sink=sink, resume_from=resume_from)


def train_into_folder(config: RunConfig, build: Callable[..., Any], *, output_dir: str | Path, sink: Sink,
                      resume_from: str | Path | None = None) -> TrainResult:
    """Write ``config.yaml``, build with ``build(config, output_dir=, sink=)``, train with checkpoints in
    ``checkpoints/``, and on completion export the models to ``model/``."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(dump_run_config(config), encoding="utf-8")
    trainer = build(config, output_dir=out, sink=sink)
    try:
        result = trainer.train(resume_from_checkpoint=resume_from, checkpoint_dir=out / "checkpoints", sink=sink)
        if result.status == "completed":
            trainer.save_model(out / "model")
    finally:
        close = getattr(trainer, "close", None)
        if close is not None:
            close()
    return result
