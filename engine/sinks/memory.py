"""Sinks that keep nothing (``NullSink``) or everything in memory (``MemorySink``, for tests)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.sinks.base import BaseSink, Episode


class NullSink(BaseSink):
    """Discards every report and never asks to stop: the default when nobody listens."""


@dataclass(frozen=True)
class StepReport:
    """What a trainer reported for one training step."""

    step: int
    env_step: int
    metrics: dict[str, float]
    episodes: list[Episode]


@dataclass
class MemorySink(BaseSink):
    """Keeps every report in lists, so tests can look at what a trainer said.

    ``stop_after_steps`` makes ``should_stop`` answer True once that many steps were logged, which
    lets tests exercise a trainer's graceful stop.
    """

    stop_after_steps: int | None = None
    started: list[tuple[int | None, dict]] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    metrics: list[tuple[int, int, dict[str, float]]] = field(default_factory=list)
    transcripts: list[tuple[int, list[Episode]]] = field(default_factory=list)
    checkpoints: list[tuple[int, str]] = field(default_factory=list)
    pruned: list[tuple[int, str]] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    def start(self, total_steps: int | None, config: dict) -> None:
        self.started.append((total_steps, dict(config)))

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Episode]) -> None:
        self.steps.append(StepReport(step, env_step, dict(metrics), list(episodes)))
        super().log_step(step, env_step, metrics, episodes)

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        self.metrics.append((step, env_step, dict(metrics)))

    def log_transcripts(self, step: int, episodes: list[Episode]) -> None:
        self.transcripts.append((step, list(episodes)))

    def log_checkpoint(self, step: int, path: str) -> None:
        self.checkpoints.append((step, path))

    def log_checkpoint_pruned(self, step: int, path: str) -> None:
        self.pruned.append((step, path))

    def should_stop(self) -> bool:
        return self.stop_after_steps is not None and len(self.steps) >= self.stop_after_steps

    def finish(self, status: str) -> None:
        self.finished.append(status)

    # convenience readers for tests

    def series(self, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` for every report of metric ``key``, in order."""
        return [(step, m[key]) for step, _, m in self.metrics if key in m]

    def last(self, key: str) -> float:
        """The latest value of metric ``key``; KeyError naming the known keys when it was never logged."""
        values = self.series(key)
        if not values:
            known = sorted({k for _, _, m in self.metrics for k in m})
            raise KeyError(f"metric {key!r} was never logged; logged keys: {known}")
        return values[-1][1]

    @property
    def episodes(self) -> list[Episode]:
        """Every episode reported, in order."""
        return [episode for _, episodes in self.transcripts for episode in episodes]
