"""``MultiSink``: fan one trainer's reports out to several sinks (e.g. console + JSONL + database)."""

from __future__ import annotations

from collections.abc import Callable

from engine.sinks.base import Episode, Sink


class MultiSink:
    """Forwards every call to each sink in order; asks to stop when any sink asks.

    Every sink gets ``finish`` even when an earlier one raised; the first error is raised after.
    """

    def __init__(self, *sinks: Sink) -> None:
        self.sinks: list[Sink] = list(sinks)

    def _each(self, call: Callable[[Sink], None]) -> None:
        for sink in self.sinks:
            call(sink)

    def start(self, total_steps: int | None, config: dict) -> None:
        self._each(lambda s: s.start(total_steps, config))

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Episode]) -> None:
        self._each(lambda s: s.log_step(step, env_step, metrics, episodes))

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        self._each(lambda s: s.log_metrics(step, env_step, metrics))

    def log_transcripts(self, step: int, episodes: list[Episode]) -> None:
        self._each(lambda s: s.log_transcripts(step, episodes))

    def log_checkpoint(self, step: int, path: str) -> None:
        self._each(lambda s: s.log_checkpoint(step, path))

    def log_checkpoint_pruned(self, step: int, path: str) -> None:
        self._each(lambda s: s.log_checkpoint_pruned(step, path))

    def should_stop(self) -> bool:
        return any([sink.should_stop() for sink in self.sinks])  # ask every sink (each may poll)

    def finish(self, status: str) -> None:
        first_error: BaseException | None = None
        for sink in self.sinks:
            try:
                sink.finish(status)
            except Exception as exc:  # noqa: BLE001 - every sink must get the chance to close
                first_error = first_error or exc
        if first_error is not None:
            raise first_error
