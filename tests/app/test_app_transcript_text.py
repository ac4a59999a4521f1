"""Transcripts: code shown as code (monospace, highlighted), whole characters only (a character cut
by the token limit is left out, never shown as "\ufffd"), the environment's feedback between turns shown
in the dialogue."""

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


def test_the_feedback_between_turns_is_shown_in_the_dialogue(app, store: Store, experiment: int) -> None:
    from engine.tasks.transitions import revise_with_feedback

    item = "Topic: islands."
    feedback = {"writer": "Too short: add two letters.", "editor": "Off your half: use n-z."}
    transition = revise_with_feedback(lambda *, agent_index, **_: list(feedback.values())[agent_index])
    replies = ["abc", "xyz"]
    second = transition(prompt=item, agent_completions=replies, num_agents=2)

    def turn(number: int, index: int, prompt: str, reply: str) -> TurnRecord:
        return TurnRecord(turn=number, agent_index=index, agent_name=list(feedback)[index], prompt=prompt,
                          completion=reply, reward=0.5, ret=0.5, advantage=0.0)

    turns = (turn(1, 0, item, "abc"), turn(1, 1, item, "xyz"), turn(2, 0, second[0], "abcdef"),
             turn(2, 1, second[1], "nopxyz"))
    config = dict(store.get_experiment(experiment).config)
    run_id = store.create_run(experiment, config, "cpu", total_steps=2, device="cpu").id
    store.transition(run_id, "starting")
    store.transition(run_id, "running")
    store.log_step(run_id, 1, 4, {"train/reward_mean": 0.5}, [Episode(sample_index=0, turns=turns)], wall_time=1.7e9)
    at = app("transcripts", run=run_id)
    assert not at.exception
    bubbles = at.chat_message
    assert [b.name for b in bubbles] == ["writer", "editor", "environment", "writer", "editor"]
    environment = bubbles[2]  # not inside a collapsed prompt: in the dialogue, before the second turn
    assert [m.value for m in environment.markdown] == ["**environment** · to writer", "**environment** · to editor"]
    assert [t.value for t in environment.text] == [
        f"Feedback:\n{text}\n\nWrite an improved answer." for text in feedback.values()]


def test_feedback_between_by_hand() -> None:
    from app.turn_feedback import feedback_between

    template = "Topic.\n\nYour previous answer:\n{}\n\nFeedback:\nshorter\n\nWrite an improved answer."
    assert feedback_between("Topic.", "a", template.format("a")) == \
        "Feedback:\nshorter\n\nWrite an improved answer."  # a one-letter reply is not found inside "answer"
    assert feedback_between("Topic.", "  x = 1  ", template.format("  x = 1  ")).startswith("Feedback:")
    assert feedback_between("Topic.", "gone", "Topic. Try again.") == "Try again."  # reply not quoted
    assert feedback_between("same", "reply", "same") == ""
    # prompts that differ inside a line: that line whole, not from the first character that differs
    assert feedback_between("Topic: islands.", "gone", "Topic: islets. Try again.") == "Topic: islets. Try again."
    # feedback that quotes the reply's line again (a traceback of a one-line reply) is kept whole
    code = "Task.\n\nYour previous code:\n{}\n\nTest feedback:\n{}\n\nFix the problems and write the code again."
    traceback = "Error: line 2, in add\n    return a + b\nTypeError: unsupported operand"
    assert feedback_between("Task.", "    return a + b", code.format("    return a + b", traceback)) == (
        f"Test feedback:\n{traceback}\n\nFix the problems and write the code again.")
