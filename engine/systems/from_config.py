"""From a run config with a ``system`` section to a :class:`System` of MAGRPO-family trainers.

The task is built once for the whole team (its formatters and team reward); each trainer group
gets its agents' models (``share_weights_with`` inside the group), its agents' formatters, the
run's trainer settings with the group's overrides, and :func:`deferred_reward` (the system scores).
"""

from __future__ import annotations

import functools
from pathlib import Path

from engine.build.run_folder import train_into_folder
from engine.build.team import agent_setups, load_team
from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.schema.configure import trainer_config
from engine.schema.run_config import ConfigError, RunConfig
from engine.schema.system_spec import (
    AlternatingSpec,
    CustomSpec,
    EveryKSpec,
    RoundRobinSpec,
    SystemSpec,
    group_trainer_spec,
    parse_system_spec,
)
from engine.sinks.base import Sink
from engine.systems.schedule import (
    AllTogether,
    Alternating,
    Custom,
    EveryK,
    RoundRobin,
    Schedule,
    load_callable,
)
from engine.systems.system import System, deferred_reward
from engine.trainer import MAGRPOTrainer, TrainResult


def schedule_from_spec(spec: SystemSpec, task_modules: tuple[str, ...] = ()) -> Schedule:
    """The schedule object a validated spec describes (a custom function from a module of ``task_modules``,
    the operator's allowlist)."""
    s = spec.schedule
    if isinstance(s, AlternatingSpec):
        return Alternating(phase_length=s.phase_length, order=tuple(s.order) if s.order else None)
    if isinstance(s, RoundRobinSpec):
        return RoundRobin(phase_length=s.phase_length, order=tuple(s.order) if s.order else None)
    if isinstance(s, EveryKSpec):
        return EveryK(every=dict(s.every))
    if isinstance(s, CustomSpec):
        return Custom(load_callable(s.function, task_modules))
    return AllTogether()


def build_system(config: RunConfig, *, output_dir: str | Path | None, sink: Sink | None = None,
                 permissions: OperatorPermissions = LIBRARY) -> System:
    """Agents, task, one trainer per group, and the system coordinating them, under the operator's
    ``permissions`` (:mod:`engine.permissions.operator`)."""
    from engine.tasks import build_task

    spec = parse_system_spec(config, permissions.task_modules)
    try:
        schedule = schedule_from_spec(spec, permissions.task_modules)
    except ValueError as exc:
        raise ConfigError(f"system.schedule: {exc}") from None
    task = build_task(config.task.name, dict(config.task.params), len(config.agents), permissions=permissions)
    index_of = {a.name: i for i, a in enumerate(config.agents)}
    out = Path(output_dir) if output_dir is not None else None
    trainers: dict[str, MAGRPOTrainer] = {}
    for group in spec.trainers:
        agents = [config.agents[index_of[name]] for name in group.agents]
        cfg = permissions.configure(trainer_config(group_trainer_spec(config, group), agents))
        team = load_team(agents, cfg.agent_devices, (cfg.model_config or {}).get("torch_dtype"),
                         seed=config.trainer.seed, allow_remote_code=permissions.allow_remote_code)
        trainers[group.name] = MAGRPOTrainer(
            agents=agent_setups(team, [task.formatters[index_of[a.name]] for a in agents]),
            train_dataset=task.train_dataset, reward_func=deferred_reward, args=cfg,
            output_dir=out / "trainers" / group.name if out is not None else None,
        )
    caps = [r for r in (spec.rounds, config.trainer.max_steps) if r is not None]
    rounds = min(caps) if caps else None  # trainer.max_steps (e.g. cooplab train --max-steps) caps the rounds
    return System(
        trainers, reward_func=task.reward_func, train_dataset=task.train_dataset, schedule=schedule, rounds=rounds,
        num_epochs=config.trainer.num_train_epochs, items_per_round=spec.items_per_round, seed=config.trainer.seed,
        shuffle=config.trainer.shuffle, transcripts_per_round=spec.transcripts_per_round,
        checkpoint_interval=spec.checkpoint_interval, checkpoint_total_limit=config.trainer.checkpoint_total_limit,
        sink=sink, output_dir=out, config=spec.model_dump(mode="json"), eval_dataset=task.eval_dataset,
        eval_interval=config.trainer.eval_interval, eval_num_samples=config.trainer.eval_num_samples,
    )


def run_system(config: RunConfig, *, output_dir: str | Path, sink: Sink, resume_from: str | Path | None = None,
               permissions: OperatorPermissions = LIBRARY) -> TrainResult:
    """Train a system end to end: ``config.yaml``, ``checkpoints/``, and on completion ``model/<trainer>/``."""
    return train_into_folder(config, functools.partial(build_system, permissions=permissions), output_dir=output_dir,
                             sink=sink, resume_from=resume_from)
