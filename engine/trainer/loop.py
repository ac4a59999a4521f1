"""The training loop shared by every trainer: roll out and update step by step, report through the
sink, evaluate and checkpoint on schedule, and stop (with a checkpoint) when the sink asks.

A trainer using it provides ``args`` (checkpoint_interval, checkpoint_total_limit, eval_interval,
logging_steps, ``to_dict()``), ``step``, ``env_step``, ``total_steps``, ``eval_dataset``, ``sink``,
``output_dir``, ``last_checkpoint``, ``train_step()``, ``evaluate(sink=)``, ``save_checkpoint(path)``
and ``load_checkpoint(path)``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from engine.sinks.base import BaseSink, Sink


@dataclass(frozen=True)
class TrainResult:
    """How a ``train()`` call ended."""

    status: str  # "completed" or "stopped"
    step: int
    env_step: int
    last_checkpoint: str | None


class TrainLoopMixin:
    """``train()`` as a loop over ``train_step()``."""

    def train(
        self,
        resume_from_checkpoint: str | Path | None = None,
        checkpoint_dir: str | Path | None = None,
        checkpoint_interval: int | None = None,
        checkpoint_total_limit: int | None = None,
        *,
        sink: Sink | None = None,
    ) -> TrainResult:
        """Train until ``total_steps`` (epochs or ``max_steps``) or until the sink asks to stop.

        With an eval dataset and ``eval_interval`` N > 0, evaluation runs before steps 0, N, 2N, ...
        (CoMLRL's schedule) and once more on the final weights when this call completes a run it
        advanced (after the final checkpoint).

        Checkpoints go to ``checkpoint_dir`` (default ``<output_dir>/checkpoints``) every
        ``checkpoint_interval`` steps (default from the config) and when training ends or stops.
        """
        cfg = self.args
        sink = sink or self.sink or BaseSink()
        interval = cfg.checkpoint_interval if checkpoint_interval is None else checkpoint_interval
        limit = cfg.checkpoint_total_limit if checkpoint_total_limit is None else checkpoint_total_limit
        ckpt_root = Path(checkpoint_dir) if checkpoint_dir else (self.output_dir / "checkpoints" if self.output_dir else None)
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)
        sink.start(self.total_steps, self.args.to_dict())
        status = "completed"
        saved_at = -1
        first_step = self.step
        try:
            while self.step < self.total_steps:
                if sink.should_stop():
                    status = "stopped"
                    break
                if self.eval_dataset is not None and cfg.eval_interval and self.step % cfg.eval_interval == 0:
                    self.evaluate(sink=sink)
                metrics, episodes = self.train_step()
                log_now = self.step % cfg.logging_steps == 0 or self.step in (1, self.total_steps)
                sink.log_step(self.step, self.env_step, metrics if log_now else {}, episodes if log_now else [])
                if ckpt_root is not None and interval and self.step % interval == 0:
                    self._checkpoint(ckpt_root, limit, sink)
                    saved_at = self.step
            if ckpt_root is not None and saved_at != self.step:
                self._checkpoint(ckpt_root, limit, sink)
            # the final weights, which no scheduled evaluation saw; after the checkpoint, so the
            # evaluation's random draws never reach a resumed run
            if status == "completed" and self.step > first_step and self.eval_dataset is not None and cfg.eval_interval:
                self.evaluate(sink=sink)
        except BaseException:
            sink.finish("failed")
            raise
        sink.finish(status)
        return TrainResult(status=status, step=self.step, env_step=self.env_step, last_checkpoint=self.last_checkpoint)

    def _checkpoint(self, root: Path, limit: int | None, sink: Sink) -> None:
        path = self.save_checkpoint(root / f"checkpoint-{self.step}")
        self.last_checkpoint = str(path)
        sink.log_checkpoint(self.step, str(path))
        if limit:
            existing = sorted((p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                              key=lambda p: int(p.name.split("-")[-1]))
            for old in existing[:-limit]:
                shutil.rmtree(old, ignore_errors=True)

