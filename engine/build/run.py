"""From a validated :class:`engine.schema.run_config.RunConfig` to a running trainer: the one build path.

``build_trainer`` maps the trainer spec onto the algorithm's config (:mod:`engine.schema.configure`),
builds the task, loads the team (:mod:`engine.build.team`) and constructs the trainer the algorithm table
names (:mod:`engine.schema.algorithms`); a centralized run (one model writes every role,
:mod:`engine.schema.collaboration`) gets the task's ``centralized_adapter``. ``run_training``
also writes the config next to the checkpoints, trains, exports the final models and returns a
:class:`TrainResult`; a config with a ``system`` section goes to
:func:`engine.systems.from_config.run_system`, which builds each of its trainers the same way. The
CLI and the job executor both call ``run_training``.

Before anything is built, ``run_training`` checks what the config asks of this machine: every device
it names exists here (:func:`engine.schema.budget.device_problems` against ``torch.cuda.device_count()``),
and every folder it names for writing lies in the run's output folder or one of the ``write_roots``
the caller gives (the data directory; :mod:`engine.permissions.write_paths`). The iterative preference trainers
check each target again right before they write it. With the caller's ``read_roots``, every file or
folder it names for reading lies in one of them (:mod:`engine.permissions.read_paths`), checked before anything
is built and again by each loader. It also checks what only the operator can allow
(:mod:`engine.permissions.run_permissions`: the API comparator's host and key, code that comes with a model).
The operator's permissions come as one value (:class:`engine.permissions.operator.OperatorPermissions`, default
:data:`engine.permissions.operator.LIBRARY`) and go to what reads them: the task (its module allowlist, the
code sandbox), the team's loading (remote code), the trainer (the API comparator's hosts and keys, the
vLLM python).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.build.run_folder import train_into_folder
from engine.build.team import agent_setups, load_team
from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.permissions.read_paths import ReadArea, check_read_paths, reading_within
from engine.permissions.run_permissions import check_permissions
from engine.permissions.write_paths import WriteArea, check_write_paths
from engine.schema.algorithms import trainer_class
from engine.schema.budget import device_problems
from engine.schema.collaboration import is_centralized
from engine.schema.configure import trainer_config
from engine.schema.errors import ConfigError
from engine.schema.run_config import RunConfig
from engine.schema.run_config_sections import has_critics
from engine.sinks.base import Sink
from engine.tasks.building import build_task_for
from engine.trainer.core import TrainResult


def build_trainer(config: RunConfig, *, output_dir: str | Path | None, sink: Sink | None = None,
                  write_area: WriteArea | None = None, permissions: OperatorPermissions = LIBRARY) -> Any:
    """Agents + task + the algorithm's trainer for a run config (see the module docstring); a trainer
    that writes folders the config names gets ``write_area`` (None: not confined), one that sends
    requests the operator's ``permissions``."""
    cfg = permissions.configure(trainer_config(config.trainer, config.agents))
    task = build_task_for(config, cfg.num_turns, permissions)
    team = load_team(config.agents, cfg.agent_devices, (cfg.model_config or {}).get("torch_dtype"),
                     seed=config.trainer.seed, allow_remote_code=permissions.allow_remote_code)
    # the MAGRPO family reports pass@k with the task's check; actor-critic evaluation has no pass@k
    critics = has_critics(config.trainer.algorithm, config.trainer.rl_algorithm)
    extra: dict[str, Any] = {} if critics else {"eval_check": task.check}
    if is_centralized(config.trainer.algorithm, config.trainer.collaboration_mode):
        extra["centralized_adapter"] = task.centralized_adapter  # one model writes the task's roles
    cls = trainer_class(config.trainer.algorithm)
    if config.trainer.parallel_training == "fsdp":  # each agent sharded over the launch's ranks
        from engine.distributed.trainer import FSDPMAGRPOTrainer

        cls = FSDPMAGRPOTrainer
    accepted = inspect.signature(cls).parameters
    if write_area is not None and "write_area" in accepted:
        extra["write_area"] = write_area
    if "permissions" in accepted:
        extra["permissions"] = permissions
    return cls(
        agents=agent_setups(team, task.formatters), train_dataset=task.train_dataset,
        eval_dataset=task.eval_dataset, reward_func=task.reward_func, external_transition=task.external_transition,
        eval_logger=task.eval_logger, eval_aggregator=task.eval_aggregator, args=cfg, sink=sink,
        output_dir=output_dir, **extra,
    )


def check_devices(config: RunConfig) -> None:
    """Raise :class:`engine.schema.run_config.ConfigError` naming each device ``config`` asks for that this process
    does not have (``cuda:99`` on a machine, or in a pinned job, with fewer GPUs)."""
    import torch

    problems = device_problems(config, torch.cuda.device_count(), "on this machine")
    if problems:
        raise ConfigError("\n".join(f"{field}: {message}" for field, message in problems))


def run_training(config: RunConfig, *, output_dir: str | Path, sink: Sink,
                 resume_from: str | Path | None = None,
                 write_roots: Sequence[str | os.PathLike[str]] = (),
                 read_roots: Sequence[str | os.PathLike[str]] | None = None,
                 permissions: OperatorPermissions = LIBRARY) -> TrainResult:
    """Train a run config end to end.

    Writes ``config.yaml``, checkpoints under ``checkpoints/`` and, when training completes, the
    final models under ``model/agent_{i}/``. ``resume_from`` is a checkpoint folder of an earlier
    attempt of the same config. A folder the config names for writing must lie in ``output_dir`` or
    one of ``write_roots`` (the data directory), symlinks resolved; the devices it names must exist.
    With ``read_roots`` (the job executor's and the CLI's: the operator's read roots) every file or
    folder the config names for reading must lie in one of them, checked now and again by each loader
    while the run trains (:mod:`engine.permissions.read_paths`); None (library use) does not confine reads.
    ``permissions``: the operator's (:class:`engine.permissions.operator.OperatorPermissions`; the job executor's
    and the CLI's come from the operator's settings), checked now and passed to what reads them.
    """
    check_permissions(config, permissions)  # the API hosts and remote-code permission (engine.permissions.run_permissions)
    check_devices(config)
    area = WriteArea.of(output_dir, write_roots)
    check_write_paths([("trainer", config.trainer, output_dir)], area)
    reads = None if read_roots is None else ReadArea.of(read_roots)
    if reads is not None:
        check_read_paths(config, reads)
    with reading_within(reads):
        if config.system is not None:
            from engine.systems.from_config import run_system

            return run_system(config, output_dir=output_dir, sink=sink, resume_from=resume_from,
                              permissions=permissions)
        return train_into_folder(config, functools.partial(build_trainer, write_area=area, permissions=permissions),
                                 output_dir=output_dir, sink=sink, resume_from=resume_from)
