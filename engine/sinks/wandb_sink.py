"""``WandbSink``: reports to Weights & Biases, only when the optional ``wandb`` package is installed.

Nothing imports wandb unless this sink is constructed. Metrics are logged with the training step
as wandb's step and ``env_step`` as an extra series (CoMLRL's x-axis); transcripts become a table.
"""

from __future__ import annotations

import importlib
from typing import Any

from engine.sinks.base import BaseSink, Episode

INSTALL_HINT = "pip install wandb (or the project's extra: pip install 'cooplab[wandb]')"
TRANSCRIPT_COLUMNS = [
    "step", "split", "sample_index", "item_index", "turn", "agent", "prompt", "completion", "reward", "return",
    "advantage", "credit",
]  # fmt: skip


def import_wandb() -> Any:
    """The wandb module, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("wandb")
    except ImportError as exc:
        raise ImportError(
            f"WandbSink needs the optional wandb package, which is not installed: {INSTALL_HINT}"
        ) from exc


class WandbSink(BaseSink):
    """Starts a wandb run at ``start`` and logs every report to it.

    Keyword arguments (``project``, ``entity``, ``name``, ``tags``, ``mode``, ``dir``, ...) go to
    ``wandb.init``; the trainer's config is merged into the run config.
    """

    def __init__(self, **init_kwargs: Any) -> None:
        self.wandb = import_wandb()
        self.init_kwargs = init_kwargs
        self.run: Any = None

    def start(self, total_steps: int | None, config: dict) -> None:
        merged = {**dict(self.init_kwargs.get("config") or {}), **config, "total_steps": total_steps}
        self.run = self.wandb.init(**{**self.init_kwargs, "config": merged})

    def _ensure_run(self) -> Any:
        if self.run is None:
            self.start(None, {})
        return self.run

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        self._ensure_run().log({**{k: float(v) for k, v in metrics.items()}, "env_step": env_step}, step=step)

    def log_transcripts(self, step: int, episodes: list[Episode]) -> None:
        rows = [
            [step, e.split, e.sample_index, e.item_index, t.turn, t.agent_name, t.prompt, t.completion, t.reward,
             t.ret, t.advantage, t.credit]
            for e in episodes
            for t in e.turns
        ]  # fmt: skip
        table = self.wandb.Table(columns=TRANSCRIPT_COLUMNS, data=rows)
        self._ensure_run().log({"transcripts": table}, step=step)

    def log_checkpoint(self, step: int, path: str) -> None:
        self._ensure_run().summary["last_checkpoint"] = path

    def finish(self, status: str) -> None:
        if self.run is not None:
            self.run.summary["status"] = status
            self.run.finish(exit_code=0 if status in ("completed", "stopped") else 1)
            self.run = None
