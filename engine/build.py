"""From a validated :class:`engine.spec.RunConfig` to a running trainer: the one build path.

``build_trainer`` maps the trainer spec onto the algorithm's config (:mod:`engine.configure`),
builds the task, loads the team (:mod:`engine.team`) and constructs the trainer the algorithm table
names (:mod:`engine.algorithms`); a centralized run (one model writes every role,
:mod:`engine.preference.collaboration`) gets the task's ``centralized_adapter``. ``run_training``
also writes the config next to the checkpoints, trains, exports the final models and returns a
:class:`TrainResult`; a config with a ``system`` section goes to
:func:`engine.systems.from_config.run_system`, which builds each of its trainers the same way. The
CLI and the job executor both call ``run_training``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.algorithms import trainer_class
from engine.configure import build_task_for, trainer_config
from engine.preference.collaboration import is_centralized
from engine.run_folder import train_into_folder
from engine.sinks.base import Sink
from engine.spec import RunConfig, has_critics
from engine.team import load_team, team_arguments
from engine.trainer.loop import TrainResult


def build_trainer(config: RunConfig, *, output_dir: str | Path | None, sink: Sink | None = None) -> Any:
    """Agents + task + the algorithm's trainer for a run config (see the module docstring)."""
    cfg = trainer_config(config.trainer, config.agents)
    task = build_task_for(config, cfg.num_turns)
    team = load_team(config.agents, cfg.agent_devices, (cfg.model_config or {}).get("torch_dtype"),
                     seed=config.trainer.seed)
    # the MAGRPO family reports pass@k with the task's check; actor-critic evaluation has no pass@k
    critics = has_critics(config.trainer.algorithm, config.trainer.rl_algorithm)
    extra = {} if critics else {"eval_check": task.check}
    if is_centralized(config.trainer.algorithm, config.trainer.collaboration_mode):
        extra["centralized_adapter"] = task.centralized_adapter  # one model writes the task's roles
    return trainer_class(config.trainer.algorithm)(
        agents=team.models, tokenizer=team.tokenizers, train_dataset=task.train_dataset,
        eval_dataset=task.eval_dataset, reward_func=task.reward_func, external_transition=task.external_transition,
        eval_logger=task.eval_logger, eval_aggregator=task.eval_aggregator, args=cfg, sink=sink,
        output_dir=output_dir, **team_arguments(config.agents, task.formatters), **extra,
    )


def run_training(config: RunConfig, *, output_dir: str | Path, sink: Sink,
                 resume_from: str | Path | None = None) -> TrainResult:
    """Train a run config end to end.

    Writes ``config.yaml``, checkpoints under ``checkpoints/`` and, when training completes, the
    final models under ``model/agent_{i}/``. ``resume_from`` is a checkpoint folder of an earlier
    attempt of the same config.
    """
    if config.system is not None:
        from engine.systems.from_config import run_system

        return run_system(config, output_dir=output_dir, sink=sink, resume_from=resume_from)
    return train_into_folder(config, build_trainer, output_dir=output_dir, sink=sink, resume_from=resume_from)
