"""Per-turn credit in the store: a turn's credit (team reward less the reward with that agent's reply
left empty) is written and read back, on SQLite and PostgreSQL; a turn without one (credit not
measured, or a row from before the column) reads as None; the transcripts JSONL export carries it."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from db.store import Store
from engine.transcripts import Episode, TurnRecord


def _turn(agent: int, name: str, credit: float | None, turn: int = 1) -> TurnRecord:
    return TurnRecord(turn=turn, agent_index=agent, agent_name=name, prompt=f"prompt of {name}",
                      completion=f"reply of {name}", reward=0.75, ret=0.75, advantage=0.25 - agent, credit=credit)


def test_credit_round_trips_per_turn(store: Store, run_id: int) -> None:
    measured = Episode(sample_index=0, split="train", item_index=4,
                       turns=(_turn(0, "reader", 0.5), _turn(1, "writer", -0.125),
                              _turn(0, "reader", 0.0, turn=2), _turn(1, "writer", None, turn=2)))
    store.log_step(run_id, 1, 4, {"agent/reader/credit": 0.25, "agent/writer/credit": -0.125}, [measured])
    [stored] = store.episodes(run_id)
    assert [(t.turn, t.agent_name, t.credit) for t in stored.turns] == [
        (1, "reader", 0.5), (1, "writer", -0.125), (2, "reader", 0.0), (2, "writer", None)]
    assert stored.turns[0].advantage == pytest.approx(0.25)  # the other numbers are untouched


def test_unmeasured_and_non_finite_credit_read_as_none(store: Store, run_id: int) -> None:
    plain = Episode(sample_index=0, split="train", item_index=0,
                    turns=(TurnRecord(1, 0, "reader", "p", "c", 1.0, 1.0, 0.0),))  # credit left at its default
    nan = Episode(sample_index=1, split="train", item_index=1, turns=(_turn(0, "reader", math.nan),))
    # a turn object of an older writer, without a credit attribute at all
    old = SimpleNamespace(sample_index=2, split="train", item_index=2, turns=(SimpleNamespace(
        turn=1, agent_index=0, agent_name="reader", prompt="p", completion="c", reward=0.0, ret=0.0, advantage=0.0),))
    store.log_step(run_id, 1, 4, {}, [plain, nan, old])
    assert [(e.sample_index, e.turns[0].credit) for e in store.episodes(run_id)] == [(0, None), (1, None), (2, None)]


def test_the_transcripts_export_carries_credit(store: Store, run_id: int) -> None:
    store.log_step(run_id, 1, 4, {}, [Episode(sample_index=0, split="train", item_index=0,
                                              turns=(_turn(0, "reader", 0.5), _turn(1, "writer", None)))])
    [line] = "".join(store.stream_episodes_jsonl(run_id)).splitlines()
    turns = json.loads(line)["turns"]
    assert [(t["agent_name"], t["credit"]) for t in turns] == [("reader", 0.5), ("writer", None)]
    assert json.loads(store.export_episodes_jsonl(run_id))["turns"][0]["credit"] == 0.5
