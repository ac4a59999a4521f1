"""The training loop shared by every trainer and by systems of trainers: step by step, report
through the sink, evaluate and checkpoint on schedule, and stop (with a checkpoint) when the sink
asks (:func:`run_loop`).

What the loop needs of its owner is written down as :class:`LoopOwner`; what a trainer's ``train()``
(:func:`train_trainer`) needs of it as :class:`Trainable` (every :class:`engine.trainer.core.TrainerCore`
is both).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.sinks.base import BaseSink, Sink
from engine.trainer.best_checkpoint import BestCheckpoint
from engine.trainer.credit_probe import credit_note
from engine.trainer.rollout_copy import announce, sampling_notes


class LoopOwner(Protocol):
    """What :func:`run_loop` reads and calls on a trainer or a system of trainers."""

    env_step: int
    eval_dataset: Any
    last_checkpoint: str | None

    def evaluate(self, *, sink: Sink) -> dict[str, float]: ...

    def save_checkpoint(self, path: Path) -> Path: ...


class Trainable(LoopOwner, Protocol):
    """What :func:`train_trainer` needs besides: its config, counters, sink and one step."""

    args: Any  # checkpoint_interval, checkpoint_total_limit, eval_interval, logging_steps, to_dict()
    step: int
    total_steps: int
    sink: Sink | None
    output_dir: Path | None

    def train_step(self) -> tuple[dict[str, float], list]: ...

    def load_checkpoint(self, path: str | Path) -> None: ...


@dataclass(frozen=True)
class TrainResult:
    """How a ``train()`` call ended."""

    status: str  # "completed" or "stopped"
    step: int
    env_step: int
    last_checkpoint: str | None


@dataclass(frozen=True)
class LoopSchedule:
    """When the loop evaluates, reports and checkpoints (0 = never / at the end only)."""

    total: int
    eval_interval: int
    logging_steps: int
    checkpoint_interval: int
    checkpoint_total_limit: int | None


def run_loop(owner: LoopOwner, *, position: Callable[[], int], advance: Callable[[], tuple[dict, list]],
             schedule: LoopSchedule, sink: Sink, checkpoint_root: Path | None, run_config: dict,
             best: BestCheckpoint | None = None) -> TrainResult:
    """Advance ``owner`` until ``schedule.total`` or until the sink asks to stop (see the module doc).

    ``position()`` is the owner's step counter and ``advance()`` one step (its metrics and
    episodes); ``owner`` provides ``env_step``, ``eval_dataset``, ``evaluate(sink=)``,
    ``save_checkpoint(path)`` and ``last_checkpoint``. Evaluation runs before steps 0, N, 2N, ... of
    ``eval_interval`` N (CoMLRL's schedule) and once more on the final weights when this call
    completes a run it advanced, after the final checkpoint, so its random draws never reach a
    resumed run. With ``best``, each evaluation's weights are offered to it
    (:mod:`engine.trainer.best_checkpoint`), which keeps the best of them apart from the rolling
    checkpoints.
    """
    sink.start(schedule.total, run_config)
    status, saved_at, first = "completed", -1, position()
    evaluates = owner.eval_dataset is not None and schedule.eval_interval > 0
    try:
        while position() < schedule.total:
            if sink.should_stop():
                status = "stopped"
                break
            if evaluates and position() % schedule.eval_interval == 0:
                _evaluate(owner, position(), sink, best)
            metrics, episodes = advance()
            step = position()
            log_now = step % schedule.logging_steps == 0 or step in (1, schedule.total)
            sink.log_step(step, owner.env_step, metrics if log_now else {}, episodes if log_now else [])
            if checkpoint_root is not None and schedule.checkpoint_interval and step % schedule.checkpoint_interval == 0:
                _checkpoint(owner, checkpoint_root, step, schedule.checkpoint_total_limit, sink)
                saved_at = step
        if checkpoint_root is not None and saved_at != position():
            _checkpoint(owner, checkpoint_root, position(), schedule.checkpoint_total_limit, sink)
        if status == "completed" and evaluates and position() > first:
            _evaluate(owner, position(), sink, best)
    except BaseException:
        sink.finish("failed")
        raise
    sink.finish(status)
    return TrainResult(status=status, step=position(), env_step=owner.env_step, last_checkpoint=owner.last_checkpoint)


def _evaluate(owner: LoopOwner, step: int, sink: Sink, best: BestCheckpoint | None) -> None:
    metrics = owner.evaluate(sink=sink)
    if best is not None:
        best.offer(owner, step, metrics)


def _checkpoint(owner: LoopOwner, root: Path, step: int, limit: int | None, sink: Sink) -> None:
    """``checkpoint-<step>`` under ``root``, reported to the sink; only the newest ``limit`` are kept,
    and each one removed is reported too."""
    path = owner.save_checkpoint(root / f"checkpoint-{step}")
    owner.last_checkpoint = str(path)
    sink.log_checkpoint(step, str(path))
    if limit:
        existing = sorted((p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                          key=lambda p: int(p.name.split("-")[-1]))
        for old in existing[:-limit]:
            shutil.rmtree(old, ignore_errors=True)
            if not old.exists():
                sink.log_checkpoint_pruned(int(old.name.split("-")[-1]), str(old))


def train_trainer(
    trainer: Trainable,
    resume_from_checkpoint: str | Path | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_interval: int | None = None,
    checkpoint_total_limit: int | None = None,
    *,
    sink: Sink | None = None,
) -> TrainResult:
    """A trainer's ``train()``: :func:`run_loop` over its ``train_step()`` until ``total_steps`` (epochs
    or ``max_steps``) or until the sink asks to stop.

    Checkpoints go to ``checkpoint_dir`` (default ``<output_dir>/checkpoints``) every
    ``checkpoint_interval`` steps (default from the config) and when training ends or stops.
    Evaluation follows :func:`run_loop`; with ``best_checkpoint_metric`` the best evaluated weights
    are also kept in ``<checkpoint_dir>/best`` (:mod:`engine.trainer.best_checkpoint`).
    """
    cfg = trainer.args
    probes = credit_note(getattr(cfg, "credit_samples", 0), len(trainer.agents))  # their cost, when asked for
    announce([*sampling_notes(trainer.agents, cfg), *([probes] if probes else [])])
    root = Path(checkpoint_dir) if checkpoint_dir else (
        trainer.output_dir / "checkpoints" if trainer.output_dir else None)
    if resume_from_checkpoint is not None:
        trainer.load_checkpoint(resume_from_checkpoint)
    schedule = LoopSchedule(
        total=trainer.total_steps, eval_interval=cfg.eval_interval, logging_steps=cfg.logging_steps,
        checkpoint_interval=cfg.checkpoint_interval if checkpoint_interval is None else checkpoint_interval,
        checkpoint_total_limit=cfg.checkpoint_total_limit if checkpoint_total_limit is None
        else checkpoint_total_limit,
    )
    best = None
    metric = getattr(cfg, "best_checkpoint_metric", None)
    if metric and root is not None:
        earlier = Path(resume_from_checkpoint).parent if resume_from_checkpoint is not None else None
        best = BestCheckpoint.restored(metric, cfg.best_checkpoint_mode, root, earlier_root=earlier)
    return run_loop(trainer, position=lambda: trainer.step, advance=trainer.train_step, schedule=schedule,
                    sink=sink or trainer.sink or BaseSink(), checkpoint_root=root, run_config=cfg.to_dict(),
                    best=best)
