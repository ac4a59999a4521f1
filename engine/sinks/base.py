"""The sink protocol: the only way the engine reports (metrics, transcripts, checkpoints, stop).

The engine knows nothing of databases or dashboards. A trainer calls its sink once per step with
that step's metrics and sampled episodes; the job executor's sink writes them to the database, the
CLI's to JSONL files and a progress bar, tests use the in-memory sink. The episodes are
:mod:`transcripts` records, the one turn record type the store and the dashboard use too.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from engine.transcripts import Episode, TurnRecord

__all__ = ["BaseSink", "Episode", "Sink", "TurnRecord"]


@runtime_checkable
class Sink(Protocol):
    """Receives what a trainer reports. Metric keys are ``section/name`` (``train/reward_mean``).

    The trainer calls ``log_step`` exactly once per training step with that step's metrics and
    sampled episodes (a database sink writes both in one transaction). ``log_metrics`` and
    ``log_transcripts`` carry extra reports between steps (evaluation). ``log_checkpoint`` reports a
    checkpoint folder once it is written; ``log_checkpoint_pruned`` one the trainer removed to keep
    only the newest ``checkpoint_total_limit``. ``should_stop`` is asked at every step boundary; when
    it answers True the trainer checkpoints and returns.
    """

    def start(self, total_steps: int | None, config: dict) -> None: ...

    def log_step(
        self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Episode]
    ) -> None: ...

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None: ...

    def log_transcripts(self, step: int, episodes: list[Episode]) -> None: ...

    def log_checkpoint(self, step: int, path: str) -> None: ...

    def log_checkpoint_pruned(self, step: int, path: str) -> None: ...

    def should_stop(self) -> bool: ...

    def finish(self, status: str) -> None: ...


class BaseSink:
    """A sink that ignores everything; subclass it and override what you need."""

    def start(self, total_steps: int | None, config: dict) -> None:
        return None

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Episode]) -> None:
        self.log_metrics(step, env_step, metrics)
        if episodes:
            self.log_transcripts(step, episodes)

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        return None

    def log_transcripts(self, step: int, episodes: list[Episode]) -> None:
        return None

    def log_checkpoint(self, step: int, path: str) -> None:
        return None

    def log_checkpoint_pruned(self, step: int, path: str) -> None:
        return None

    def should_stop(self) -> bool:
        return False

    def finish(self, status: str) -> None:
        return None
