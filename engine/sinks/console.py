"""``ConsoleSink``: a tqdm progress bar with the team reward and the step time, for the CLI.

Evaluation reports (``eval/...`` metrics logged between steps) and checkpoints are printed as
lines above the bar; the final status is printed when the run finishes.
"""

from __future__ import annotations

import sys
from typing import IO

from tqdm import tqdm

from engine.sinks.base import BaseSink, Episode

REWARD_KEY = "train/reward_mean"
STEP_TIME_KEY = "perf/step_time_s"


def _short(metrics: dict[str, float], limit: int = 8) -> str:
    items = sorted(metrics.items())[:limit]
    text = ", ".join(f"{key}={value:.4g}" for key, value in items)
    return text + (", ..." if len(metrics) > limit else "")


class ConsoleSink(BaseSink):
    """Shows training progress on a terminal (``stream`` defaults to stderr)."""

    def __init__(
        self, stream: IO[str] | None = None, *, description: str = "train", disable: bool = False
    ) -> None:
        self.stream = stream
        self.description = description
        self.disable = disable
        self._bar: tqdm | None = None

    def _out(self) -> IO[str]:
        return self.stream if self.stream is not None else sys.stderr

    def start(self, total_steps: int | None, config: dict) -> None:
        self._bar = tqdm(
            total=total_steps,
            desc=self.description,
            unit="step",
            file=self._out(),
            disable=self.disable,
            dynamic_ncols=True,
        )

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Episode]) -> None:
        if self._bar is None:
            self.start(None, {})
        assert self._bar is not None
        postfix: dict[str, object] = {"env_step": env_step}
        if REWARD_KEY in metrics:
            postfix["reward"] = f"{metrics[REWARD_KEY]:.4g}"
        if STEP_TIME_KEY in metrics:
            postfix["step_s"] = f"{metrics[STEP_TIME_KEY]:.3g}"
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(max(step - self._bar.n, 1))  # works for 0- and 1-based steps and resumes

    def _line(self, text: str) -> None:
        if self.disable:
            return
        if self._bar is not None:
            self._bar.write(text, file=self._out())
        else:
            print(text, file=self._out(), flush=True)

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        if metrics:
            self._line(f"step {step} (env_step {env_step}): {_short(metrics)}")

    def log_checkpoint(self, step: int, path: str) -> None:
        self._line(f"step {step}: checkpoint saved to {path}")

    def finish(self, status: str) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._line(f"run {status}")
