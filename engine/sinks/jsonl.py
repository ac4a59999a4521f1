"""``JsonlSink``: append-only JSON-lines files of metrics, transcripts and run events.

A run folder gets three files, each flushed after every write so a crash loses nothing already
reported and other processes can tail them:

- ``metrics.jsonl``: ``{"step", "env_step", "wall_time", "metrics": {key: value}}`` per report;
- ``transcripts.jsonl``: one episode per line, ``{"step", "sample_index", "split", "item_index",
  "turns": [{turn, agent_index, agent_name, prompt, completion, reward, ret, advantage, credit}]}``
  (``credit``: the team reward less the reward with that agent's reply left empty, ``null`` where the
  step did not measure it; files written before credit existed have no such key and read as None);
- ``events.jsonl``: ``start`` (total steps, config), ``checkpoint`` (step, path), ``checkpoint_pruned``
  (step, path: a folder removed to keep ``checkpoint_total_limit``), ``finish`` (status).

Non-finite numbers are written as ``null`` so every line is standard JSON. Creating a file named
``STOP`` in the folder makes ``should_stop`` answer True (a graceful stop from a shell).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from engine.sinks.base import BaseSink, Episode, TurnRecord

METRICS_FILE = "metrics.jsonl"
TRANSCRIPTS_FILE = "transcripts.jsonl"
EVENTS_FILE = "events.jsonl"
STOP_FILE = "STOP"


def _number(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _clean(value: Any) -> Any:
    """Floats made finite-or-null, recursively, so the line is standard JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def episode_to_dict(step: int, episode: Episode) -> dict[str, Any]:
    """The JSON form of one episode reported at ``step``."""
    return _clean({"step": step, **asdict(episode)})


def _turn_fields(turn: dict[str, Any]) -> dict[str, Any]:
    return {k: (math.nan if v is None and k in ("reward", "ret", "advantage") else v) for k, v in turn.items()}


def episode_from_dict(data: dict[str, Any]) -> tuple[int, Episode]:
    """Inverse of ``episode_to_dict``: ``(step, Episode)``; a null reward, return or advantage comes
    back as NaN, a null or missing credit as None (not measured)."""
    turns = tuple(TurnRecord(**_turn_fields(t)) for t in data["turns"])
    episode = Episode(
        sample_index=data["sample_index"], split=data["split"], item_index=data["item_index"], turns=turns
    )
    return int(data["step"]), episode


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a JSON-lines file (a half-written last line, from a crash, is skipped)."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if not line.endswith("\n"):  # only the torn last line may be incomplete
                    break
                raise
    return records


class JsonlSink(BaseSink):
    """Writes reports to ``metrics.jsonl``, ``transcripts.jsonl`` and ``events.jsonl`` in ``folder``."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, IO[str]] = {}

    def _write(self, name: str, record: dict[str, Any]) -> None:
        f = self._files.get(name)
        if f is None:
            f = self._files[name] = open(self.folder / name, "a", encoding="utf-8")  # noqa: SIM115
        f.write(json.dumps(record, ensure_ascii=False, default=str, allow_nan=False) + "\n")
        f.flush()

    def start(self, total_steps: int | None, config: dict) -> None:
        event = {"event": "start", "wall_time": time.time(), "total_steps": total_steps, "config": config}
        self._write(EVENTS_FILE, _clean(event))

    def log_metrics(self, step: int, env_step: int, metrics: dict[str, float]) -> None:
        values = {key: _number(value) for key, value in metrics.items()}
        self._write(
            METRICS_FILE, {"step": step, "env_step": env_step, "wall_time": time.time(), "metrics": values}
        )

    def log_transcripts(self, step: int, episodes: list[Episode]) -> None:
        for episode in episodes:
            self._write(TRANSCRIPTS_FILE, episode_to_dict(step, episode))

    def log_checkpoint(self, step: int, path: str) -> None:
        self._write(
            EVENTS_FILE, {"event": "checkpoint", "wall_time": time.time(), "step": step, "path": str(path)}
        )

    def log_checkpoint_pruned(self, step: int, path: str) -> None:
        self._write(
            EVENTS_FILE, {"event": "checkpoint_pruned", "wall_time": time.time(), "step": step, "path": str(path)}
        )

    def should_stop(self) -> bool:
        return (self.folder / STOP_FILE).exists()

    def finish(self, status: str) -> None:
        self._write(EVENTS_FILE, {"event": "finish", "wall_time": time.time(), "status": status})
        self.close()

    def close(self) -> None:
        """Close the open files (``finish`` does this; a later write reopens them in append mode)."""
        files = getattr(self, "_files", {})  # absent when __init__ failed (e.g. the folder was unwritable)
        for f in files.values():
            f.close()
        files.clear()

    def __del__(self) -> None:
        self.close()
