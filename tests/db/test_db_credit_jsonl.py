"""Per-turn credit in a run folder's ``transcripts.jsonl``: written by the JSONL sink, read back by its
reader; a line from before credit was measured (no ``credit`` key) reads as None, and an unmeasured
credit stays None (not NaN, which stands for a non-finite reward)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from engine.sinks.jsonl import TRANSCRIPTS_FILE, JsonlSink, episode_from_dict, read_jsonl
from engine.transcripts import Episode, TurnRecord


def _episode(credits: tuple[float | None, float | None]) -> Episode:
    return Episode(sample_index=0, split="train", item_index=3, turns=tuple(
        TurnRecord(turn=1, agent_index=i, agent_name=name, prompt="p", completion="c", reward=1.0, ret=1.0,
                   advantage=0.5, credit=credit)
        for i, (name, credit) in enumerate(zip(("a", "b"), credits, strict=True))))


def test_the_sink_writes_credit_and_the_reader_gives_it_back(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path)
    sink.log_transcripts(7, [_episode((0.25, None)), _episode((math.inf, -0.5))])
    sink.close()
    lines = read_jsonl(tmp_path / TRANSCRIPTS_FILE)
    assert [[t["credit"] for t in line["turns"]] for line in lines] == [[0.25, None], [None, -0.5]]
    step, episode = episode_from_dict(lines[0])
    assert step == 7 and [t.credit for t in episode.turns] == [0.25, None]


def test_a_line_without_credit_reads_as_none(tmp_path: Path) -> None:
    old = {"step": 2, "sample_index": 0, "split": "train", "item_index": None, "turns": [
        {"turn": 1, "agent_index": 0, "agent_name": "a", "prompt": "p", "completion": "c", "reward": None,
         "ret": 0.0, "advantage": 0.0}]}
    step, episode = episode_from_dict(json.loads(json.dumps(old)))
    [turn] = episode.turns
    assert step == 2 and turn.credit is None and math.isnan(turn.reward)
