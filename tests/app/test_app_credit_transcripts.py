"""Transcripts: each agent's turn shows its credit (team reward less the reward with its reply left
empty) next to reward, return and advantage where the step measured it, and nothing where not."""

from __future__ import annotations

from db.store import Store
from engine.transcripts import Episode, TurnRecord


def test_turn_caption_by_hand() -> None:
    from app.components.transcript_view import turn_caption

    measured = TurnRecord(1, 0, "a", "p", "c", reward=0.5, ret=0.75, advantage=0.125, credit=0.12)
    assert turn_caption(measured) == "reward 0.500 · return 0.750 · advantage +0.125 · credit +0.120"
    negative = TurnRecord(1, 1, "b", "p", "c", reward=0.5, ret=0.75, advantage=-0.125, credit=-0.5)
    assert turn_caption(negative).endswith("advantage -0.125 · credit -0.500")
    unmeasured = TurnRecord(1, 1, "b", "p", "c", reward=0.5, ret=0.75, advantage=0.0)
    assert turn_caption(unmeasured) == "reward 0.500 · return 0.750 · advantage +0.000"


def test_the_transcripts_page_shows_each_agents_credit(app, store: Store, experiment: int) -> None:
    config = dict(store.get_experiment(experiment).config)
    run_id = store.create_run(experiment, config, "cpu", total_steps=2, device="cpu").id
    store.transition(run_id, "starting")
    store.transition(run_id, "running")
    episode = Episode(sample_index=0, split="train", item_index=0, turns=(
        TurnRecord(1, 0, "writer", "p", "the writer's reply", 0.8, 0.8, 0.25, credit=0.6),
        TurnRecord(1, 1, "editor", "p", "the editor's reply", 0.8, 0.8, -0.25, credit=None)))
    store.log_step(run_id, 1, 4, {"agent/writer/credit": 0.6}, [episode], wall_time=1.7e9)
    at = app("transcripts", run=run_id)
    assert not at.exception
    writer, editor = at.chat_message
    assert "reward 0.800 · return 0.800 · advantage +0.250 · credit +0.600" in writer.markdown[0].value
    assert "credit" not in editor.markdown[0].value  # not measured for this turn: nothing shown
    assert any("credit" in c.value and "left empty" in c.value for c in at.caption)  # what credit means
