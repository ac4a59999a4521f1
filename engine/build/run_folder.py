"""A run's output folder: the config it ran, its checkpoints, its final models and, when the run kept
a best checkpoint (``best_checkpoint_metric``), the best models too, each written atomically
(:mod:`engine.schema.folders`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.schema.folders import atomic_folder, atomic_text
from engine.schema.run_config import RunConfig, dump_run_config
from engine.sinks.base import Sink
from engine.trainer.checkpoint import BEST_FOLDER, load_team_weights, read_record
from engine.trainer.core import TrainResult


def train_into_folder(config: RunConfig, build: Callable[..., Any], *, output_dir: str | Path, sink: Sink,
                      resume_from: str | Path | None = None) -> TrainResult:
    """Write ``config.yaml``, build with ``build(config, output_dir=, sink=)``, train with checkpoints in
    ``checkpoints/``, and on completion export the models to ``model/`` and, when a best checkpoint
    was kept (``checkpoints/best``), its models to ``model_best/`` (the same layout: ``agent_<i>/``)."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_text(out / "config.yaml", dump_run_config(config), "run config")
    trainer = build(config, output_dir=out, sink=sink)
    try:
        result = trainer.train(resume_from_checkpoint=resume_from, checkpoint_dir=out / "checkpoints", sink=sink)
        if result.status == "completed":
            with atomic_folder(out / "model", "model export") as folder:  # never a half-written model/
                trainer.save_model(folder)
            best = out / "checkpoints" / BEST_FOLDER
            if read_record(out / "checkpoints") is not None and hasattr(trainer, "agents"):
                load_team_weights(trainer.agents, best)  # training is over: the trainer's weights become the best
                with atomic_folder(out / "model_best", "best model export") as folder:
                    trainer.save_model(folder)
    finally:
        close = getattr(trainer, "close", None)
        if close is not None:
            close()
    return result
