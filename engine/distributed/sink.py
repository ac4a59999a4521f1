"""The sink of an FSDP rank: rank 0 reports (metrics, transcripts, checkpoints, the end) to the run's
sink, the other ranks report nothing, and every rank stops when rank 0's sink asks (its answer is
broadcast, so no rank is left waiting in a collective for one that stopped)."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from engine.sinks.base import BaseSink, Episode, Sink


class RankSink(BaseSink):
    """``inner`` on rank 0 (None elsewhere); ``should_stop`` is rank 0's answer on every rank."""

    def __init__(self, inner: Sink | None, rank: int, world: int) -> None:
        self.inner = inner if rank == 0 else None
        self.rank, self.world = rank, world

    def start(self, total_steps: int | None, config: dict) -> None:
        if self.inner is not None:
            self.inner.start(total_steps, config)

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Episode]) -> None:
        if self.inner is not None:
            self.inner.log_step(step, env_step, metrics, episodes)

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        if self.inner is not None:
            self.inner.log_metrics(step, env_step, metrics)

    def log_transcripts(self, step: int, episodes: list[Episode]) -> None:
        if self.inner is not None:
            self.inner.log_transcripts(step, episodes)

    def log_checkpoint(self, step: int, path: str) -> None:
        if self.inner is not None:
            self.inner.log_checkpoint(step, path)

    def log_checkpoint_pruned(self, step: int, path: str) -> None:
        if self.inner is not None:
            self.inner.log_checkpoint_pruned(step, path)

    def should_stop(self) -> bool:
        answer: list[Any] = [bool(self.inner.should_stop()) if self.inner is not None else False]
        if self.world > 1:
            dist.broadcast_object_list(answer, src=0)
        return bool(answer[0])

    def finish(self, status: str) -> None:
        if self.inner is not None:
            self.inner.finish(status)
