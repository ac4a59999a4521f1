"""Sinks: where the engine reports metrics, transcripts and checkpoints.

``NullSink`` (default), ``MemorySink`` (tests), ``ConsoleSink`` (progress bar), ``JsonlSink``
(files), ``WandbSink`` (optional wandb; importing this package never imports wandb) and
``MultiSink`` (fan-out).
"""

from engine.sinks.base import BaseSink, Episode, Sink, TurnRecord
from engine.sinks.console import ConsoleSink
from engine.sinks.jsonl import JsonlSink, episode_from_dict, episode_to_dict, read_jsonl
from engine.sinks.memory import MemorySink, NullSink, StepReport
from engine.sinks.multi import MultiSink
from engine.sinks.wandb_sink import WandbSink

__all__ = [
    "BaseSink",
    "ConsoleSink",
    "Episode",
    "JsonlSink",
    "MemorySink",
    "MultiSink",
    "NullSink",
    "Sink",
    "StepReport",
    "TurnRecord",
    "WandbSink",
    "episode_from_dict",
    "episode_to_dict",
    "read_jsonl",
]
