"""CoMLRL's benchmarks in the dashboard: the Experiments page offers each one's task and preset, and a
preset loaded into the form is saved as it was written (its task, its level reward, its slices, its
trainer settings), not as the form's defaults."""

from __future__ import annotations

from db.store import Store
from engine.schema.presets import PRESETS

COMLRL = ("coop_humaneval", "mbpp", "humaneval_level", "tldr", "arxiv")
"""The presets of issue 44's tasks (``humaneval_level``: the ``humaneval`` task with CoMLRL's level reward)."""


def test_each_comlrl_preset_is_offered_and_saved_as_written(app, store: Store) -> None:
    at = app()
    at.button(key="create_quickstart").click().run()
    assert not at.exception
    gen = at.session_state["exp_gen"]
    offered = at.selectbox(key=f"ed{gen}.task").options  # "<title> (<name>)"
    assert all(any(o.endswith(f"({task})") for o in offered) for task in ("coop_humaneval", "mbpp", "humaneval",
                                                                          "tldr", "arxiv")), offered
    assert {PRESETS[name]["title"] for name in COMLRL} <= set(at.selectbox(key="exp_preset").options)
    for name in COMLRL:
        preset = PRESETS[name]["config"]
        at.selectbox(key="exp_pick").set_value(0).run()  # a new experiment
        at.selectbox(key="exp_preset").set_value(name).run()
        at.button(key="exp_load_preset").click().run()
        gen = at.session_state["exp_gen"]
        assert at.selectbox(key=f"ed{gen}.task").value == preset["task"]["name"], name
        at.button(key="exp_save").click().run()
        assert not at.exception and not at.error, (name, [e.value for e in at.error])
        (saved,) = [e for e in store.list_experiments() if e.name == preset["name"]]
        config = dict(saved.config)
        assert config["task"]["name"] == preset["task"]["name"]
        assert config["task"]["params"].items() >= preset["task"]["params"].items(), name
        assert [a["name"] for a in config["agents"]] == [a["name"] for a in preset["agents"]]
        assert config["trainer"].items() >= preset["trainer"].items(), name
    level = next(e for e in store.list_experiments() if e.name == PRESETS["humaneval_level"]["config"]["name"])
    assert level.config["task"]["params"]["reward"] == "level"  # not the humaneval task's default ladder
