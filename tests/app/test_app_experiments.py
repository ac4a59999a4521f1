"""Experiments page: first visit, the team form (valid and invalid input), presets, YAML, clone, delete,
launch through the real job client."""

from __future__ import annotations

import pytest
import yaml

from app.control import with_seed
from db.store import Store
from engine.schema.presets import PRESETS
from engine.schema.run_config import RunConfig, parse_run_config


def _column_with(at, key: str):
    """The form column holding the widget ``key`` (its errors are printed in the same column)."""
    for column in at.columns:
        if any(w.key == key for w in (*column.number_input, *column.text_input, *column.selectbox)):
            return column
    raise AssertionError(f"no column holds widget {key}")


def _create_quickstart(app):
    at = app()
    at.button(key="create_quickstart").click().run()
    assert not at.exception
    return at


def test_first_visit_offers_the_quickstart_and_launches_it(app, store: Store, monkeypatch) -> None:
    at = app()
    assert not at.exception
    assert any("no experiments yet" in m.value for m in at.markdown)
    at.button(key="create_quickstart").click().run()
    [experiment] = store.list_experiments()
    assert dict(experiment.config) == PRESETS["quickstart"]["config"]
    assert at.header[0].value == f"Edit experiment #{experiment.id}"
    assert at.text_input(key="ed1.agent0.name").value == "first"
    parses = []  # every RunConfig parse in this process while the launch reruns the page
    parse = RunConfig.model_validate
    monkeypatch.setattr(RunConfig, "model_validate",
                        classmethod(lambda cls, *args, **kwargs: parses.append(1) or parse(*args, **kwargs)))
    at.button(key="exp_launch").click().run()
    assert not at.exception
    # one: the form's; the unsaved-changes check and the job client take it (4 before: the form, the diff
    # of saved and draft, submit_run)
    assert len(parses) == 1
    monkeypatch.undo()
    [run] = store.list_runs()
    assert run.status == "queued" and run.experiment_id == experiment.id and run.queue == "cpu"
    assert any(f"Queued run #{run.id}" in s.value for s in at.success)
    # the run holds what parsing the saved config gives (the form also writes the task's defaults)
    expected = parse_run_config(with_seed(PRESETS["quickstart"]["config"], run.config["trainer"]["seed"]))
    expected = expected.model_dump(mode="json")
    assert {k: v for k, v in run.config.items() if k != "task"} == {k: v for k, v in expected.items() if k != "task"}
    assert run.config["task"]["params"].items() >= expected["task"]["params"].items()


def test_invalid_input_is_shown_next_to_the_field_and_blocks_saving(app, store: Store) -> None:
    at = _create_quickstart(app)
    before = dict(store.list_experiments()[0].config)
    at.number_input(key="ed1.trainer.num_generations").set_value(1).run()
    column = _column_with(at, "ed1.trainer.num_generations")
    assert [e.value for e in column.error] == ["must be >= 2 for magrpo (the group baseline needs siblings)"]
    assert at.button(key="exp_save").disabled
    assert "1 field(s) need attention" in at.error[0].value
    assert dict(store.list_experiments()[0].config) == before  # nothing saved
    at.number_input(key="ed1.trainer.num_generations").set_value(6).run()
    assert not at.error and not at.button(key="exp_save").disabled
    at.button(key="exp_save").click().run()
    assert store.list_experiments()[0].config["trainer"]["num_generations"] == 6


def test_team_rows_validate_names_sharing_and_team_size(app, store: Store) -> None:
    at = _create_quickstart(app)
    at.text_input(key="ed1.agent1.name").set_value("first").run()
    # said beside the repeated role names, not only at the top
    for index, other in ((0, 1), (1, 0)):
        column = _column_with(at, f"ed1.agent{index}.name")
        assert [e.value for e in column.error] == [
            f"role name 'first' is also used by agent {other}; each agent needs its own role name"]
    assert not any("agent names must be unique" in e.value for e in at.error)
    assert at.button(key="exp_save").disabled
    at.text_input(key="ed1.agent1.name").set_value("second").run()
    at.selectbox(key="ed1.agent1.share").set_value("first").run()
    assert not at.error
    at.button(key="ed1.add_agent").click().run()
    assert [t.value for t in at.text_input if t.key.endswith(".name") and ".agent" in t.key] == \
        ["first", "second", "agent_2"]
    assert any("is played by 2 agent(s), not 3" in e.value for e in at.error)
    at.button(key="ed2.agent2.remove").click().run()
    assert not at.error
    at.button(key="exp_save").click().run()
    agents = store.list_experiments()[0].config["agents"]
    assert [a["name"] for a in agents] == ["first", "second"] and agents[1]["share_weights_with"] == "first"


def test_task_parameters_come_from_the_tasks_schema(app, store: Store) -> None:
    at = _create_quickstart(app)
    assert at.number_input(key="ed1.task.quickstart.num_items").value == 16
    at.number_input(key="ed1.task.quickstart.num_items").set_value(0).run()
    column = _column_with(at, "ed1.task.quickstart.num_items")
    assert column.error and "greater than" in column.error[0].value
    at.selectbox(key="ed1.task").set_value("writing").run()
    assert at.text_input(key="ed1.task.writing.text_column").value  # the writing task's own parameter
    assert not [w for w in at.number_input if w.key.startswith("ed1.task.quickstart")]


def _import_draft(at, config: dict) -> int:
    """Load ``config`` into the form through the YAML import; returns the form's generation."""
    at.file_uploader(key="exp_upload").set_value(("cfg.yaml", yaml.safe_dump(config).encode(), "application/x-yaml"))
    at.run()
    at.button(key="exp_import").click().run()
    assert not at.exception
    return at.session_state["exp_gen"]


def test_a_custom_task_path_must_come_from_an_allowed_module(app, store: Store, monkeypatch) -> None:
    monkeypatch.delenv("COOPLAB_TASK_MODULES", raising=False)
    at = _create_quickstart(app)
    offered = at.selectbox(key="ed1.task").options
    names = [o.rsplit("(", 1)[-1].rstrip(")") for o in offered]  # "Title (name)"
    assert "quickstart" in names and not [n for n in names if ":" in n]  # built-ins only: no import paths offered
    before = dict(store.list_experiments()[0].config)
    config = {**before, "task": {"name": "os:system", "params": {"command": "touch /tmp/never"}}}
    gen = _import_draft(at, config)
    assert at.selectbox(key=f"ed{gen}.task").value == "os:system"
    errors = [e.value for e in at.error]
    assert any(e.startswith("task 'os:system' is not allowed: module 'os' is not on the task module allowlist")
               and "COOPLAB_TASK_MODULES" in e for e in errors), errors
    assert at.button(key="exp_save").disabled
    assert dict(store.list_experiments()[0].config) == before
    monkeypatch.setenv("COOPLAB_TASK_MODULES", "tests.jobs.plugin_tasks")  # the operator allows the module
    gen = _import_draft(at, {**before, "task": {"name": "tests.jobs.plugin_tasks:slow_quickstart", "params": {}}})
    assert not at.error and not at.button(key="exp_save").disabled


def test_preflight_problems_are_shown_next_to_their_fields(app, store: Store, tmp_path) -> None:
    at = _create_quickstart(app)
    before = dict(store.list_experiments()[0].config)
    missing = tmp_path / "no-such-model"
    agents = [{**before["agents"][0], "model": str(missing)}, before["agents"][1]]
    gen = _import_draft(at, {**before, "agents": agents})
    column = _column_with(at, f"ed{gen}.agent0.model")
    assert [e.value for e in column.error] == [f"folder {missing} does not exist"]
    assert at.button(key="exp_save").disabled
    gen = _import_draft(at, before)
    assert not at.error
    at.number_input(key=f"ed{gen}.trainer.max_new_tokens").set_value(4000).run()
    column = _column_with(at, f"ed{gen}.trainer.max_new_tokens")
    assert [e.value for e in column.error] == ["4000 new tokens do not fit the context of agents.0.model "
                                               "(builtin:tiny-llama: 2048 positions, prompt included); set less "
                                               "than 2048"]
    assert at.button(key="exp_save").disabled


def test_presets_new_experiment_and_duplicate_names(app, store: Store) -> None:
    at = _create_quickstart(app)
    at.selectbox(key="exp_pick").set_value(0).run()
    assert at.header[0].value == "New experiment"
    at.selectbox(key="exp_preset").set_value("writing").run()
    at.button(key="exp_load_preset").click().run()
    name = PRESETS["writing"]["config"]["name"]
    assert at.text_input(key=f"ed{at.session_state['exp_gen']}.name").value == name
    at.button(key="exp_save").click().run()
    assert {e.name for e in store.list_experiments()} == {"quickstart", name}
    # a second experiment with a taken name is refused with a message, not an exception
    at.selectbox(key="exp_pick").set_value(0).run()
    at.text_input(key=f"ed{at.session_state['exp_gen']}.name").set_value("quickstart").run()
    at.button(key="exp_save").click().run()
    assert not at.exception
    assert any("already exists" in e.value for e in at.error)
    assert len(store.list_experiments()) == 2


def test_yaml_import_and_export(app, store: Store) -> None:
    at = _create_quickstart(app)
    assert not at.get("download_button")[0].disabled  # export of a valid config
    config = yaml.safe_load(yaml.safe_dump(PRESETS["quickstart"]["config"]))
    config["name"] = "from-yaml"
    config["trainer"]["num_generations"] = 0
    at.file_uploader(key="exp_upload").set_value(("cfg.yaml", yaml.safe_dump(config).encode(), "application/x-yaml"))
    at.run()
    at.button(key="exp_import").click().run()
    gen = at.session_state["exp_gen"]
    assert at.text_input(key=f"ed{gen}.name").value == "from-yaml"
    column = _column_with(at, f"ed{gen}.trainer.num_generations")
    assert column.error  # the imported problem shows next to its field
    assert at.get("download_button") == [] or at.button(key="exp_export_off").disabled
    at.file_uploader(key="exp_upload").set_value(("bad.yaml", b"- a\n- list\n", "application/x-yaml"))
    at.run()
    at.button(key="exp_import").click().run()
    assert any("must be a mapping" in e.value for e in at.error)


def test_search_clone_and_delete_with_confirmation(app, store: Store) -> None:
    at = _create_quickstart(app)
    at.text_input(key="exp_clone_name_1").set_value("quickstart-lr").run()
    at.button(key="exp_clone").click().run()
    assert {e.name for e in store.list_experiments()} == {"quickstart", "quickstart-lr"}
    assert at.header[0].value == "Edit experiment #2"
    # the clone's form holds the clone's name, so saving it works (it held the source's name and Save
    # failed with "already exists")
    gen = at.session_state["exp_gen"]
    assert at.text_input(key=f"ed{gen}.name").value == "quickstart-lr"
    assert store.get_experiment(2).config["name"] == "quickstart-lr"
    at.number_input(key=f"ed{gen}.trainer.max_steps").set_value(61).run()
    at.button(key="exp_save").click().run()
    assert not [e for e in at.error if "already exists" in e.value]
    assert store.get_experiment(2).config["trainer"]["max_steps"] == 61
    at.text_input(key="exp_search").set_value("-lr").run()
    assert at.dataframe[0].value["name"].tolist() == ["quickstart-lr"]
    assert at.button(key="exp_delete").disabled  # needs the confirmation first
    at.checkbox(key="exp_delete_confirm_2").check().run()
    at.button(key="exp_delete").click().run()
    assert [e.name for e in store.list_experiments()] == ["quickstart"]


def test_experiment_deleted_elsewhere_falls_back_to_a_new_draft(app, store: Store) -> None:
    at = _create_quickstart(app)
    store.delete_experiment(store.list_experiments()[0].id)  # e.g. from another browser tab
    at.run()
    assert not at.exception
    assert at.header[0].value == "New experiment"


def test_the_open_experiment_lives_in_the_url(app, store: Store) -> None:
    at = _create_quickstart(app)
    experiment_id = store.list_experiments()[0].id
    assert at.query_params["experiment"] == str(experiment_id)
    # a refresh (a new session with the same URL) reopens it, with Launch at hand
    again = app(experiment=experiment_id)
    assert not again.exception
    assert again.header[0].value == f"Edit experiment #{experiment_id}"
    assert again.button(key="exp_launch") and again.button(key="exp_save")
    # picking "new experiment" is in the URL too, and a new experiment has none of the quick start's labels
    again.selectbox(key="exp_pick").set_value(0).run()
    assert again.query_params["experiment"] == "new"
    gen = again.session_state["exp_gen"]
    assert again.text_input(key=f"ed{gen}.name").value == "experiment-1"
    assert again.text_input(key=f"ed{gen}.description").value == ""
    assert again.text_input(key=f"ed{gen}.tags").value == ""


def test_first_visit_new_experiment_has_no_quickstart_labels(app, store: Store) -> None:
    at = app()
    assert at.text_input(key="ed0.description").value == "" and at.text_input(key="ed0.tags").value == ""


@pytest.mark.parametrize("raw", ["999", "abc"])
def test_an_unknown_experiment_in_the_url_says_so(app, store: Store, raw: str) -> None:
    store.create_experiment("demo", config=PRESETS["quickstart"]["config"])
    at = app(experiment=raw)
    assert not at.exception
    assert [e.value for e in at.error] == [f"experiment {raw} not found"]
    assert at.query_params["experiment"] == raw  # the URL is not silently rewritten
    assert not at.header  # no other experiment is shown instead


def test_unsaved_changes_come_from_a_real_diff(app, store: Store) -> None:
    at = _create_quickstart(app)
    assert not [w for w in at.warning if "Unsaved changes" in w.value]  # untouched: nothing to save
    assert at.button(key="exp_save").proto.type == "secondary"  # so Save is not the page's call to action
    at.number_input(key="ed1.trainer.max_steps").set_value(400).run()
    assert at.button(key="exp_save").proto.type == "primary"
    [warning] = [w.value for w in at.warning if "Unsaved changes" in w.value]
    assert "`trainer.max_steps` 60 → 400" in warning
    at.number_input(key="ed1.trainer.max_steps").set_value(60).run()  # back to the saved value
    assert not [w for w in at.warning if "Unsaved changes" in w.value]
    # the form says what the checkpoint settings keep (no best checkpoint; a limit deleting some)
    assert any("No best checkpoint is kept" in c.value for c in at.caption)
    assert not any("Checkpoints deleted" in c.value for c in at.caption)
    at.number_input(key="ed1.trainer.checkpoint_interval").set_value(10).run()
    assert any("writes 6 checkpoints" in c.value and "the 3 older ones are deleted" in c.value for c in at.caption)


def test_agent_header_follows_the_role_name(app, store: Store) -> None:
    at = _create_quickstart(app)
    at.text_input(key="ed1.agent1.name").set_value("reviewer").run()
    assert any(m.value == "**Agent 1** · `reviewer`" for m in at.markdown)


def test_each_run_gets_its_own_recorded_seed(app, store: Store) -> None:
    at = _create_quickstart(app)
    at.button(key="exp_launch").click().run()
    at.button(key="exp_launch").click().run()
    first, second = sorted(store.list_runs(), key=lambda r: r.id)
    seeds = [r.config["trainer"]["seed"] for r in (first, second)]
    assert seeds[0] != seeds[1] and all(s > 0 for s in seeds)  # drawn per run, not the preset's 0
    # "the same seed as run #N" repeats it; several runs at once get one new seed each
    at.run()
    assert at.selectbox(key="exp_launch_opts_seed").options[1] == f"the same seed as run #{second.id} ({seeds[1]})"
    at.selectbox(key="exp_launch_opts_seed").set_value("last").run()
    at.button(key="exp_launch").click().run()
    assert store.list_runs(limit=1)[0].config["trainer"]["seed"] == seeds[1]
    at.selectbox(key="exp_launch_opts_seed").set_value("new")
    at.number_input(key="exp_launch_opts_count").set_value(3).run()
    at.button(key="exp_launch").click().run()
    assert not at.exception
    latest = store.list_runs(limit=3)
    assert len({r.config["trainer"]["seed"] for r in latest}) == 3
    assert any("Queued runs" in s.value for s in at.success)
    links = [p.proto for p in at.main.get("page_link")]
    watched = sorted(int(link.query_string.removeprefix("run=")) for link in links if link.page == "run_detail")
    assert watched == sorted(r.id for r in latest)  # each of the 3 runs linked, not only the last
    [compare] = [link for link in links if link.page == "compare"]
    assert compare.query_string.endswith("&by=seed")


def test_two_tabs_saving_in_the_older_one_is_refused_with_reload_or_overwrite(app, store: Store) -> None:
    """Last writer no longer wins silently: the older tab sees the other save and chooses."""
    from app import commands

    def save_elsewhere(max_steps: int) -> None:  # what Save in another tab (or another user's) does
        config = dict(store.get_experiment(experiment_id).config)
        commands.save_experiment(store, experiment_id, {**config, "trainer": {**config["trainer"],
                                                                              "max_steps": max_steps}})

    tab = _create_quickstart(app)
    experiment_id = store.list_experiments()[0].id
    save_elsewhere(77)
    tab.run()  # this tab still holds the version it loaded (max_steps 60)
    assert any("was saved elsewhere" in e.value for e in tab.error)
    assert tab.button(key="exp_save").disabled
    assert not [w for w in tab.warning if "Unsaved changes" in w.value]  # not shown as the user's own change
    assert store.get_experiment(experiment_id).config["trainer"]["max_steps"] == 77  # nothing reverted
    tab.button(key="exp_stale_overwrite").click().run()  # a knowing overwrite
    assert store.get_experiment(experiment_id).config["trainer"]["max_steps"] == 60
    assert not [e for e in tab.error if "saved elsewhere" in e.value]
    save_elsewhere(90)
    tab.run()
    tab.button(key="exp_stale_reload").click().run()  # or take the other save
    gen = tab.session_state["exp_gen"]
    assert tab.number_input(key=f"ed{gen}.trainer.max_steps").value == 90
    assert not [e for e in tab.error if "saved elsewhere" in e.value]
    assert not tab.button(key="exp_save").disabled
