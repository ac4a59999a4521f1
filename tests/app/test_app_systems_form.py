"""Issue 7 in the experiment form: IAC/MAAC critic settings and a system of trainers, valid and invalid
input, saving, YAML export; plus the pure helpers behind them."""

from __future__ import annotations

import yaml

from app import actor_critic_settings as ac
from app import draft as drafts
from app.system_draft import example_system, system_errors
from db.store import Store
from engine.schema.run_config import RunConfig
from tests.app.drafts import blank_draft


def _create_quickstart(app):
    at = app()
    at.button(key="create_quickstart").click().run()
    assert not at.exception
    return at


def _column_with(at, key: str):
    """The form column holding widget ``key`` (its errors are printed in the same column)."""
    for column in at.columns:
        widgets = (*column.number_input, *column.text_input, *column.selectbox, *column.checkbox)
        if any(w.key == key for w in widgets):
            return column
    raise AssertionError(f"no column holds widget {key}")


def test_actor_critic_defaults_come_from_the_trainers_configs() -> None:
    iac, maac = ac.defaults("iac"), ac.defaults("maac")
    # CoMLRL 1.4.3: IAC clips values at 0.2 and has a separate critic by default; MAAC is unclipped
    assert iac["value_clip_range"] == 0.2 and iac["use_separate_critic"] is True
    assert iac["critic_type"] == "v" and iac["value_loss_coef"] == 0.6 and iac["critic_learning_rate"] == 5e-6
    assert maac["value_clip_range"] is None and "use_separate_critic" not in maac
    kinds = {f.name: (f.kind, f.optional) for f in ac.forms("iac")}
    assert kinds["critic_type"] == ("choice", False) and kinds["critic_devices"] == ("list_str", True)
    assert kinds["critic_value_head_hidden_dim"] == ("int", True) and kinds["use_separate_critic"] == ("bool", False)


def _errors(**trainer) -> dict[str, list[str]]:
    """The form's errors for a blank draft with these trainer settings (the build's checks)."""
    draft = blank_draft()
    draft["trainer"].update(trainer)
    return drafts.validate(draft)[1]


def test_actor_critic_validation_names_the_setting() -> None:
    assert _errors(algorithm="iac", num_generations=1, actor_critic={"critic_type": "q"}) == {}
    assert _errors(algorithm="iac", num_generations=1, actor_critic={"critic_type": "w"}) == {
        "trainer.actor_critic.critic_type": ["must be 'v' (state value) or 'q' (state-action value), got 'w'"]}
    errors = _errors(algorithm="maac", num_generations=1, clip_epsilon=0.2, joint_mode="cross",
                     actor_critic={"use_separate_critic": False})
    assert errors["trainer.clip_epsilon"][0].startswith("not used by maac")  # every unread setting, each at its field
    assert errors["trainer.joint_mode"][0].startswith("not used by maac")
    assert "unknown settings ['use_separate_critic'] for maac" in errors["trainer.actor_critic"][0]
    assert ac.edited_settings("iac", {**ac.defaults("iac"), "value_loss_coef": 0.3}, {"critic_type": "v"}) == {
        "critic_type": "v", "value_loss_coef": 0.3}


def test_example_system_is_valid_for_the_team(make_config) -> None:
    config = RunConfig.model_validate(make_config("sys"))
    agents = [a.model_dump() for a in config.agents]
    example = example_system(agents)
    assert example["schedule"] == {"type": "alternating", "phase_length": 2}
    assert [t["agents"] for t in example["trainers"]] == [["writer"], ["editor"]]
    assert system_errors(config, example) == []
    shared = [agents[0], {**agents[1], "share_weights_with": "writer"}]
    assert [t["agents"] for t in example_system(shared)["trainers"]] == [["writer", "editor"]]
    assert example_system(shared)["schedule"] == {"type": "all_together"}
    bad = {**example, "schedule": {"type": "alternating", "phase_length": 0}}
    assert any(line.startswith("system.schedule.alternating.phase_length") for line in system_errors(config, bad))
    assert system_errors(config, ["not", "a", "mapping"])[0].startswith("system: must be a mapping")


def test_iac_shows_critic_settings_validates_and_saves(app, store: Store) -> None:
    at = _create_quickstart(app)
    assert not [w for w in at.selectbox if ".trainer.ac." in w.key]  # hidden for magrpo
    at.selectbox(key="ed1.trainer.algorithm").set_value("iac").run()
    assert at.selectbox(key="ed1.trainer.ac.iac.critic_type").value == "v"
    assert at.number_input(key="ed1.trainer.ac.iac.value_clip_range").value == 0.2
    assert at.checkbox(key="ed1.trainer.ac.iac.use_separate_critic").value is True
    at.number_input(key="ed1.trainer.ac.iac.value_clip_range").set_value(-0.5).run()
    column = _column_with(at, "ed1.trainer.ac.iac.value_clip_range")
    assert [e.value for e in column.error] == ["Input should be greater than 0"]
    assert at.button(key="exp_save").disabled
    at.number_input(key="ed1.trainer.ac.iac.value_clip_range").set_value(0.1).run()
    at.selectbox(key="ed1.trainer.ac.iac.critic_type").set_value("q").run()
    at.number_input(key="ed1.trainer.num_generations").set_value(1).run()  # allowed for actor-critic
    assert not at.error and not at.button(key="exp_save").disabled
    at.button(key="exp_save").click().run()
    trainer = store.list_experiments()[0].config["trainer"]
    assert trainer["algorithm"] == "iac" and trainer["num_generations"] == 1
    assert trainer["actor_critic"] == {"critic_type": "q", "value_clip_range": 0.1}
    exported = yaml.safe_load(drafts.to_yaml(RunConfig.model_validate(store.list_experiments()[0].config)))
    assert exported["trainer"]["actor_critic"] == {"critic_type": "q", "value_clip_range": 0.1}


def test_maac_refuses_magrpo_only_fields_and_switching_back_drops_critic_settings(app, store: Store) -> None:
    at = _create_quickstart(app)
    at.selectbox(key="ed1.trainer.algorithm").set_value("maac").run()
    assert not [w for w in at.checkbox if w.key == "ed1.trainer.ac.maac.use_separate_critic"]  # IAC only
    at.number_input(key="ed1.trainer.clip_epsilon").set_value(0.2).run()
    column = _column_with(at, "ed1.trainer.clip_epsilon")
    assert any(e.value.startswith("not used by maac") for e in column.error)
    assert at.button(key="exp_save").disabled
    at.number_input(key="ed1.trainer.clip_epsilon").set_value(None).run()
    at.number_input(key="ed1.trainer.ac.maac.value_loss_coef").set_value(0.9).run()
    assert not at.error
    at.button(key="exp_save").click().run()
    assert store.list_experiments()[0].config["trainer"]["actor_critic"] == {"value_loss_coef": 0.9}
    gen = at.session_state["exp_gen"]
    at.selectbox(key=f"ed{gen}.trainer.algorithm").set_value("magrpo").run()
    assert not at.error and not [w for w in at.number_input if ".trainer.ac." in w.key]
    at.button(key="exp_save").click().run()
    assert store.list_experiments()[0].config["trainer"]["actor_critic"] == {}


def test_system_section_is_off_by_default_prefilled_validated_and_saved(app, store: Store) -> None:
    at = _create_quickstart(app)
    assert at.toggle(key="ed1.system.on").value is False
    assert not [t for t in at.text_area if t.key == "ed1.system.yaml"]
    at.toggle(key="ed1.system.on").set_value(True).run()
    prefilled = yaml.safe_load(at.text_area(key="ed1.system.yaml").value)
    assert prefilled["schedule"]["type"] == "alternating"
    assert [t["agents"] for t in prefilled["trainers"]] == [["first"], ["second"]]
    assert not at.error and not at.button(key="exp_save").disabled
    bad = {**prefilled, "trainers": [{"name": "solo", "agents": ["first", "nobody"]}]}
    at.text_area(key="ed1.system.yaml").set_value(yaml.safe_dump(bad)).run()
    messages = [e.value for e in at.error]
    assert any("system.trainers.0.agents: 'nobody' is not an agent of this run" in m for m in messages)
    assert any("'alternating' needs exactly 2 trainers" in m for m in messages)
    assert at.button(key="exp_save").disabled
    at.text_area(key="ed1.system.yaml").set_value("trainers: [unclosed").run()
    assert any("not valid YAML" in e.value for e in at.error)
    assert at.button(key="exp_save").disabled
    good = {**prefilled, "rounds": 6}
    at.text_area(key="ed1.system.yaml").set_value(yaml.safe_dump(good)).run()
    assert not at.error
    at.button(key="exp_save").click().run()
    saved = store.list_experiments()[0].config
    assert saved["system"]["rounds"] == 6 and saved["system"]["schedule"]["type"] == "alternating"
    # export keeps it, and turning the section off removes it
    assert yaml.safe_load(drafts.to_yaml(RunConfig.model_validate(saved)))["system"] == saved["system"]
    gen = at.session_state["exp_gen"]
    assert at.toggle(key=f"ed{gen}.system.on").value is True
    at.toggle(key=f"ed{gen}.system.on").set_value(False).run()
    at.button(key="exp_save").click().run()
    assert store.list_experiments()[0].config.get("system") is None


def test_yaml_import_keeps_the_system_and_shows_its_problems(app, store: Store, make_config) -> None:
    at = _create_quickstart(app)
    config = make_config("imported")
    config["system"] = {"trainers": [{"name": "w", "agents": ["writer"]}, {"name": "e", "agents": ["editor"]}],
                        "schedule": {"type": "every_k", "every": {"w": 2, "ghost": 3}}}
    at.file_uploader(key="exp_upload").set_value(("s.yaml", yaml.safe_dump(config).encode(), "application/x-yaml"))
    at.run()
    at.button(key="exp_import").click().run()
    gen = at.session_state["exp_gen"]
    assert at.toggle(key=f"ed{gen}.system.on").value is True
    assert yaml.safe_load(at.text_area(key=f"ed{gen}.system.yaml").value) == config["system"]
    assert any("system.schedule.every: unknown trainers ['ghost']" in e.value for e in at.error)
    config["system"]["schedule"]["every"] = {"w": 2}
    at.text_area(key=f"ed{gen}.system.yaml").set_value(yaml.safe_dump(config["system"])).run()
    assert not at.error
    at.button(key="exp_save").click().run()
    saved = {e.name: e.config for e in store.list_experiments()}["imported"]
    assert saved["system"]["schedule"] == {"type": "every_k", "every": {"w": 2}}


def test_marlhf_with_an_actor_critic_stage_shows_its_critic_settings(app, store: Store) -> None:
    at = _create_quickstart(app)
    at.selectbox(key="ed1.trainer.algorithm").set_value("marlhf").run()
    assert not [w for w in at.selectbox if ".trainer.ac." in w.key]  # a MAGRPO-family stage has no critics
    at.selectbox(key="ed1.trainer.rl_algorithm").set_value("iac").run()
    assert at.selectbox(key="ed1.trainer.ac.marlhf.critic_type").value == "v"
    assert at.number_input(key="ed1.trainer.ac.marlhf.value_clip_range").value == 0.2  # CoMLRL's MARLHFConfig
    at.number_input(key="ed1.trainer.ac.marlhf.value_loss_coef").set_value(0.4).run()
    at.number_input(key="ed1.trainer.num_generations").set_value(1).run()  # an actor-critic stage needs no siblings
    assert not at.exception and not at.error and not at.button(key="exp_save").disabled
    at.button(key="exp_save").click().run()
    trainer = store.list_experiments()[0].config["trainer"]
    assert (trainer["algorithm"], trainer["rl_algorithm"], trainer["actor_critic"]) == (
        "marlhf", "iac", {"value_loss_coef": 0.4})
    assert _errors(algorithm="marlhf", rl_algorithm="maac", num_generations=1,
                   actor_critic={"use_separate_critic": False}) == {
        "trainer.actor_critic.use_separate_critic": ["only rl_algorithm iac reads it (maac has one centralised "
                                                     "critic); leave it at its default (True)"]}
