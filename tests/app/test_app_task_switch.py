"""Changing the task in the form: what the previous task left (role names, lengths) is named, and the new
task's defaults are one click away."""

from __future__ import annotations

from db.store import Store


def test_changing_the_task_names_what_came_from_the_previous_one(app, store: Store) -> None:
    at = app()
    at.button(key="create_quickstart").click().run()
    at.selectbox(key="ed1.task").set_value("humaneval").run()
    assert not at.exception
    [notice] = [i.value for i in at.info if "previous task" in i.value]
    assert "`agents.0.name` first → helper" in notice and "`agents.1.name` second → main" in notice
    assert "`trainer.max_new_tokens` 12 → 256" in notice and "`trainer.num_turns` 1 → 2" in notice
    at.button(key="ed1.task_defaults").click().run()
    assert not at.exception
    assert [at.text_input(key=f"ed2.agent{i}.name").value for i in (0, 1)] == ["helper", "main"]
    assert at.number_input(key="ed2.trainer.max_new_tokens").value == 256
    assert at.selectbox(key="ed2.task").value == "humaneval"
    assert not [i for i in at.info if "previous task" in i.value]  # nothing left over now
    at.button(key="exp_save").click().run()
    saved = store.list_experiments()[0].config
    assert saved["task"]["name"] == "humaneval" and saved["trainer"]["max_new_tokens"] == 256
    assert saved["trainer"]["num_turns"] == 2 and [a["name"] for a in saved["agents"]] == ["helper", "main"]


def test_the_task_defaults_by_hand() -> None:
    from app.context import task_catalog
    from app.task_switch import carried_over, task_defaults, with_task_defaults
    from engine.schema.presets import PRESETS

    info = task_catalog()["writing"]
    defaults = task_defaults(info, PRESETS["writing"]["config"])
    assert defaults.roles == ("summary", "elaboration")
    assert defaults.trainer == {"max_new_tokens": 128, "num_turns": 1}  # the preset's length, the schema's turns
    draft = {"agents": [{"name": "a"}, {"name": "elaboration"}], "task": {"name": "writing"},
             "trainer": {"max_new_tokens": 12, "num_turns": 1}}
    assert carried_over(draft, defaults) == [("agents.0.name", "a", "summary"),
                                             ("trainer.max_new_tokens", 12, 128)]
    applied = with_task_defaults(draft, defaults)
    assert [a["name"] for a in applied["agents"]] == ["summary", "elaboration"]
    assert applied["trainer"] == {"max_new_tokens": 128, "num_turns": 1}
    assert draft["agents"][0]["name"] == "a"  # the draft itself is left as it was
