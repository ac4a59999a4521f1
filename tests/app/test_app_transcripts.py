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


def test_a_resumed_run_reads_as_one_history(app, store: Store, experiment: int, seed) -> None:
    first = seed(experiment, status="stopped", steps=4, episodes_per_step=1)
    second = store.create_run(experiment, dict(store.get_run(first).config), "cpu", resumed_from=first).id
    store.transition(second, "starting")
    store.transition(second, "running")
    from engine.transcripts import Episode, TurnRecord

    for step in (3, 4, 5):  # resumed from step 2: steps 3 and 4 again, then 5
        turns = tuple(TurnRecord(1, i, agent, "p", f"attempt 2 {agent} at step {step}", 1.0, 1.0, 0.0)
                      for i, agent in enumerate(("writer", "editor")))
        store.log_step(second, step, step * 4, {"train/reward_mean": 1.0},
                       [Episode(sample_index=0, item_index=0, turns=turns)])
    at = app("transcripts", run=first)  # the first attempt's page follows the whole history
    assert not at.exception
    assert any(f"attempt 2 #{second}" in c.value for c in at.caption)
    assert any(c.value == f"latest step: 5 (run #{second})" for c in at.caption)
    at.toggle(key="tr_latest").set_value(False).run()
    assert at.select_slider(key=f"tr_step_{first}").options == ["1", "2", "3", "4", "5"]
    at.select_slider(key=f"tr_step_{first}").set_value(4).run()
    assert {c.text[0].value for c in at.chat_message} == {"attempt 2 writer at step 4", "attempt 2 editor at step 4"}
    at.select_slider(key=f"tr_step_{first}").set_value(2).run()
    assert {c.text[0].value for c in at.chat_message} == {"reply of writer at step 2", "reply of editor at step 2"}


def test_an_unknown_run_says_not_found(app, store: Store, experiment: int, seed) -> None:
    seed(experiment, status="running", steps=1, episodes_per_step=1)
    at = app("transcripts", run=999)
    assert [e.value for e in at.error] == ["run 999 not found"] and not at.chat_message


def _step(store: Store, run_id: int, step: int, samples: int = 2) -> None:
    from engine.transcripts import Episode, TurnRecord

    store.log_step(run_id, step, step * 4, {"train/reward_mean": 1.0}, [
        Episode(sample_index=k, item_index=k, turns=tuple(
            TurnRecord(1, i, agent, "p", f"{agent} {k} at step {step}", 1.0, 1.0, 0.0)
            for i, agent in enumerate(("writer", "editor"))))
        for k in range(samples)])


def test_a_live_runs_transcripts_poll_only_new_episodes(app, store: Store, experiment: int, seed,
                                                        monkeypatch) -> None:
    """Issue 45: a running run's latest step is polled, each poll reads only the episodes stored since
    the last (one read when nothing is new), and says how many arrived; an ended run is read once and
    never polled."""
    from app.live_transcripts import LiveEpisodes
    from tests.app.polls import statements, watch_polls

    polls = watch_polls(monkeypatch)
    run_id = seed(experiment, status="running", steps=3, episodes_per_step=2)
    at = app("transcripts", run=run_id)
    assert not at.exception and len(polls.asked) == 1  # the latest step's dialogues
    held = at.session_state[f"live_transcripts.{run_id}"]
    assert isinstance(held, LiveEpisodes) and (held.step, held.rows) == (3, 2)
    _step(store, run_id, 4)
    _step(store, run_id, 5, samples=3)
    polled = polls.poll(at)
    assert not polled.exception and (held.step, held.rows) == (5, 2 + 3)  # the newest step only, once
    assert [c.text[0].value for c in polled.chat_message][:2] == ["writer 0 at step 5", "editor 0 at step 5"]
    assert any("5 new episode(s) at the last update" in c.value for c in polled.caption)
    with statements() as sent:
        polled = polls.poll(at)  # nothing new: one read of the episodes, none of their turns
    assert held.rows == 5 and len(polled.chat_message) == 6  # the held dialogues, drawn again
    assert len([s for s in sent if "FROM episodes" in s]) == 1 and not [s for s in sent if "FROM turns" in s]
    store.transition(run_id, "succeeded")
    queries = held.queries
    polled = polls.poll(at)  # the run ended while watched: the page is drawn again, the dialogues read once
    assert not polled.exception and held.queries == queries
    assert [c.text[0].value for c in polled.chat_message][:1] == ["writer 0 at step 5"]
    ended = app("transcripts", run=run_id)
    assert not ended.exception and polls.asked == {}  # nothing on the page reruns by itself
    assert [c.text[0].value for c in ended.chat_message][:1] == ["writer 0 at step 5"]
