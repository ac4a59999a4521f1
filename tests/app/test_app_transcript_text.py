"""Transcripts: code shown as code (monospace, highlighted), whole characters only (a character cut
by the token limit is left out, never shown as "\ufffd")."""

from __future__ import annotations

from db.store import Store
from engine.transcripts import Episode, TurnRecord

CODE = "def add(a, b):\n    return a + b\n"


def _log(store: Store, run_id: int, replies: list[str]) -> None:
    episode = Episode(sample_index=0, split="train", item_index=0, turns=tuple(
        TurnRecord(turn=1, agent_index=i, agent_name=name, prompt=f"prompt of {name}", completion=reply,
                   reward=0.5, ret=0.5, advantage=0.0)
        for i, (name, reply) in enumerate(zip(("helper", "main"), replies, strict=True))))
    store.transition(run_id, "starting")
    store.transition(run_id, "running")
    store.log_step(run_id, 1, 4, {"train/reward_mean": 0.5}, [episode], wall_time=1.7e9)


def test_a_coding_tasks_replies_are_highlighted_code(app, store: Store, make_config) -> None:
    config = make_config()
    config["agents"] = [{**a, "name": n} for a, n in zip(config["agents"], ("helper", "main"), strict=True)]
    config["task"] = {"name": "humaneval", "params": {}}
    experiment = store.create_experiment("coding", config=config).id
    run_id = store.create_run(experiment, config, "cpu", total_steps=2, device="cpu").id
    _log(store, run_id, [CODE, "Here it is:\n```python\nprint(add(1, 2))\n```\nDone."])
    at = app("transcripts", run=run_id)
    assert not at.exception
    helper, main = at.chat_message
    [code] = [c for c in helper.code if c.value == CODE.rstrip("\n")]
    assert code.language == "python"  # monospace with syntax highlighting
    assert not helper.text  # not shown as prose
    assert [t.value for t in main.text] == ["Here it is:", "Done."]
    assert [(c.value, c.language) for c in main.code if "add(1, 2)" in c.value] == [("print(add(1, 2))", "python")]


def test_a_character_cut_by_the_token_limit_is_left_out(app, store: Store, experiment: int) -> None:
    config = dict(store.get_experiment(experiment).config)
    run_id = store.create_run(experiment, config, "cpu", total_steps=2, device="cpu").id
    _log(store, run_id, ["caf\u00e9 cr\u00e8me br\ufffd", "na\u00efve"])
    at = app("transcripts", run=run_id)
    assert not at.exception
    first, second = at.chat_message
    assert first.text[0].value == "caf\u00e9 cr\u00e8me br"  # whole characters; the cut one left out
    assert "\ufffd" not in first.text[0].value
    assert any("cut by the token limit" in c.value for c in first.caption)
    assert second.text[0].value == "na\u00efve" and not any("cut" in c.value for c in second.caption)


def test_reply_parts_and_whole_characters_by_hand() -> None:
    from app.reply_text import Part, reply_parts, whole_characters

    assert whole_characters("br\ufffd") == ("br", True)
    assert whole_characters("a\ufffdb") == ("a\ufffdb", False)  # not at the end: not the cut
    assert whole_characters("") == ("", False)
    assert reply_parts("x = 1\n", code=True) == [Part("x = 1", "python")]
    assert reply_parts("plain words") == [Part("plain words")]
    assert reply_parts("see\n```js\nf()\n```\nend") == [Part("see"), Part("f()", "js"), Part("end")]
    assert reply_parts("```\nopen fence cut") == [Part("open fence cut", "python")]
