"""Transcripts page: dialogue bubbles per agent with role names, prompts, rewards, filters, two steps."""

from __future__ import annotations

from db.store import Store


def test_latest_step_as_dialogue(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="running", steps=3, episodes_per_step=2)
    at = app("transcripts", run=run_id)
    assert not at.exception
    assert [c.name for c in at.chat_message] == ["writer", "editor", "writer", "editor"]
    bubble = at.chat_message[0]
    assert bubble.text[0].value == "reply of writer at step 3"
    assert "reward 0.300 · return 0.300 · advantage +0.500" in bubble.markdown[0].value
    assert bubble.expander[0].label == "view as writer: the prompt it saw"
    assert bubble.code[0].value == "prompt of writer item 0"


def test_step_slider_and_text_filter(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=3, episodes_per_step=2)
    at = app("transcripts", run=run_id)
    at.toggle(key="tr_latest").set_value(False).run()
    at.select_slider(key=f"tr_step_{run_id}").set_value(1).run()
    assert {c.text[0].value for c in at.chat_message} == {"reply of writer at step 1", "reply of editor at step 1"}
    at.text_input(key="tr_text").set_value("item 1").run()
    assert len(at.chat_message) == 2  # only the episode whose prompts mention item 1
    at.number_input(key="tr_min").set_value(0.5).run()
    assert any("matches the filters" in i.value for i in at.info)


def test_two_steps_side_by_side(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=3, episodes_per_step=1)
    at = app("transcripts", run=run_id)
    at.toggle(key="tr_compare").set_value(True).run()
    assert not at.exception
    headers = [m.value for m in at.markdown if m.value.startswith("#### item")]
    assert headers == ["#### item 0 · team reward 0.100 → 0.300 (+0.200)"]  # one team reward per turn
    texts = [c.text[0].value for c in at.chat_message]
    assert texts == ["reply of writer at step 1", "reply of editor at step 1",
                     "reply of writer at step 3", "reply of editor at step 3"]


def test_run_without_episodes(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="queued")
    at = app("transcripts", run=run_id)
    assert any("no stored episodes yet" in i.value for i in at.info)
