"""Episodes and turns: totals, filters, text search, steps, export."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from db.ops_transcripts import episode_totals
from db.store import Store
from engine.transcripts import Episode, TurnRecord


def _two_agent_episode(sample: int, rewards: tuple[float, float], text: str = "", split: str = "train") -> Episode:
    turns = []
    for turn, reward in enumerate(rewards, start=1):
        for agent, name in enumerate(("reader", "writer")):
            turns.append(TurnRecord(turn, agent, name, f"prompt t{turn} {name}", f"{name} says {text} at {turn}", reward,
                                    ret=sum(rewards[turn - 1:]), advantage=0.1 * agent))
    return Episode(sample_index=sample, split=split, item_index=sample + 10, turns=tuple(turns))


def test_episode_totals_by_hand() -> None:
    ep = _two_agent_episode(0, (1.0, 0.5))
    assert episode_totals(ep.turns) == (1.5, 1.5)  # team reward 1.0 + 0.5; return from turn 1
    assert episode_totals(()) == (0.0, 0.0)


def test_turns_come_back_in_turn_then_agent_order(store: Store, run_id: int) -> None:
    ep = _two_agent_episode(3, (1.0, 0.5))
    store.log_step(run_id, 1, 4, {}, [Episode(3, "train", 13, tuple(reversed(ep.turns)))])
    [stored] = store.episodes(run_id)
    assert [(t.turn, t.agent_name) for t in stored.turns] == [(1, "reader"), (1, "writer"), (2, "reader"),
                                                              (2, "writer")]
    assert (stored.step, stored.split, stored.sample_index, stored.item_index, stored.reward, stored.ret) == \
        (1, "train", 3, 13, 1.5, 1.5)
    assert stored.turns[1].prompt == "prompt t1 writer" and stored.turns[1].advantage == pytest.approx(0.1)


def test_filters_and_text_search(store: Store, run_id: int) -> None:
    store.log_step(run_id, 1, 4, {}, [_two_agent_episode(0, (0.0, 0.0), "nothing"),
                                      _two_agent_episode(1, (1.0, 1.0), "Fibonacci 100%")])
    store.log_step(run_id, 2, 8, {}, [_two_agent_episode(0, (0.5, 0.0), "fibonacci again")])
    store.log_episodes(run_id, 2, [_two_agent_episode(0, (1.0, 0.0), "eval answer", split="eval")])

    def ids(**kw: object) -> list[tuple[int, str, int]]:
        return [(e.step, e.split, e.sample_index) for e in store.episodes(run_id, **kw)]

    assert ids() == [(2, "eval", 0), (2, "train", 0), (1, "train", 0), (1, "train", 1)]
    assert ids(step=1) == [(1, "train", 0), (1, "train", 1)]
    assert ids(split="eval") == [(2, "eval", 0)]
    assert ids(min_reward=1.0) == [(2, "eval", 0), (1, "train", 1)]
    assert ids(max_reward=0.5) == [(2, "train", 0), (1, "train", 0)]
    assert ids(text="FIBONACCI") == [(2, "train", 0), (1, "train", 1)]
    assert ids(text="100%") == [(1, "train", 1)]
    assert ids(text="i_") == []  # _ is a literal underscore, not a wildcard
    assert ids(text="prompt t2 writer", step=2, split="train") == [(2, "train", 0)]
    assert ids(limit=1, offset=1) == [(2, "train", 0)]
    assert store.episode_steps(run_id) == [1, 2]
    assert store.episode_steps(run_id, split="eval") == [2]
    with pytest.raises(ValueError, match="split must be one of"):
        store.episodes(run_id, split="dev")


def test_any_object_with_the_episode_fields_is_accepted(store: Store, run_id: int) -> None:
    turn = SimpleNamespace(turn=1, agent_index=0, agent_name="solo", prompt="p", completion="c", reward=0.75,
                           ret=0.75, advantage=0.0)
    ep = SimpleNamespace(sample_index=2, split="train", item_index=None, turns=(turn,))
    store.log_step(run_id, 5, 5, {"m": 1.0}, [ep])
    [stored] = store.episodes(run_id)
    assert (stored.item_index, stored.reward, stored.turns[0].agent_name) == (None, 0.75, "solo")
    with pytest.raises(TypeError, match="has no 'sample_index'; pass a transcripts.Episode"):
        store.log_episodes(run_id, 6, [object()])


def test_export_jsonl(store: Store, run_id: int) -> None:
    store.log_step(run_id, 1, 4, {}, [_two_agent_episode(0, (1.0,), "x")])
    [line] = store.export_episodes_jsonl(run_id).splitlines()
    row = json.loads(line)
    assert (row["step"], row["split"], row["reward"], len(row["turns"])) == (1, "train", 1.0, 2)
    assert row["turns"][1] == {"turn": 1, "agent_index": 1, "agent_name": "writer", "prompt": "prompt t1 writer",
                               "completion": "writer says x at 1", "reward": 1.0, "return": 1.0,
                               "advantage": 0.1, "credit": None}


def test_episodes_since_brings_only_the_newest_steps_new_episodes(store: Store, run_id: int) -> None:
    """A live view's read: nothing new is an empty answer with the cursor unchanged; after two steps,
    the newer step's matching episodes (by sample), the count of all new matching ones, the new cursor."""
    store.log_step(run_id, 1, 4, {}, [_two_agent_episode(s, (0.5, 0.5)) for s in (1, 0)])
    first = store.episodes_since(run_id)
    assert (first.step, first.count, [e.sample_index for e in first.episodes]) == (1, 2, [0, 1])
    again = store.episodes_since(run_id, after_id=first.top_id, step_from=first.top_step)
    assert (again.episodes, again.count, again.step, again.top_id, again.top_step) == ((), 0, None, first.top_id, 1)
    store.log_step(run_id, 2, 8, {}, [_two_agent_episode(0, (0.1, 0.1), text="low")])
    store.log_step(run_id, 3, 12, {}, [_two_agent_episode(s, (1.0, 1.0), text="high") for s in range(3)])
    new = store.episodes_since(run_id, after_id=first.top_id, step_from=first.top_step, limit=2)
    assert (new.step, new.count, [e.sample_index for e in new.episodes]) == (3, 4, [0, 1])  # at most `limit`
    assert new.episodes[0].turns[0].completion == "reader says high at 1" and new.top_step == 3
    low = store.episodes_since(run_id, after_id=first.top_id, step_from=first.top_step, max_reward=1.0)
    assert (low.step, low.count, low.top_id) == (2, 1, new.top_id)  # the filters pick; the cursor passes all
    assert store.episodes_since(run_id, after_id=new.top_id, step_from=3, text="high").count == 0
