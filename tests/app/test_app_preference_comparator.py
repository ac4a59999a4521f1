"""The iterative preference trainers' comparator in the experiment form: a policy or a checkpoint of an
earlier run of the experiment; a checkpoint folder that no longer exists is refused before launch."""

from __future__ import annotations

import shutil

from db.store import Store
from engine.schema.run_config import RunConfig
from tests.engine.preference.pref_helpers import fast_config, make_trainer


def _iter_config() -> dict:
    return RunConfig.model_validate({
        "name": "iter", "agents": [{"name": "writer", "model": "builtin:tiny-llama"},
                                   {"name": "editor", "model": "builtin:tiny-llama"}],
        "task": {"name": "quickstart", "params": {}},
        "trainer": {"algorithm": "madpo_iter", "num_iterations": 2, "preference_num_candidates": 4,
                    "preference_pairs_per_sample": 2, "max_new_tokens": 6},
    }).model_dump(mode="json")


def test_a_checkpoint_of_an_earlier_run_is_the_comparator(app, store: Store, home) -> None:
    config = _iter_config()
    experiment = store.create_experiment("iter", config=config).id
    run = store.create_run(experiment, config, "cpu", total_steps=4, device="cpu")
    folder = home / "runs" / str(run.id) / "checkpoints"  # inside the data directory: a run may read there
    kept, deleted = folder / "checkpoint-2", folder / "checkpoint-4"
    make_trainer(fast_config()).save_checkpoint(kept)  # a real checkpoint of a two-agent team
    store.add_checkpoint(run.id, 2, str(kept))
    store.add_checkpoint(run.id, 4, str(deleted))  # listed in the store, its folder gone since

    at = app("experiments", experiment=experiment)
    assert not at.exception
    gen = at.session_state["exp_gen"]
    box = at.selectbox(key=f"ed{gen}.trainer.comparator")
    assert box.value == "current"
    assert box.options[-2:] == [f"checkpoint of run #{run.id} at step 4 ({deleted})",
                                f"checkpoint of run #{run.id} at step 2 ({kept})"]
    box.set_value(f"checkpoint:{kept}").run()
    assert not at.exception and not at.error and not at.button(key="exp_save").disabled
    at.button(key="exp_save").click().run()
    trainer = store.get_experiment(experiment).config["trainer"]
    assert (trainer["comparator_policy"], trainer["comparator_checkpoint"]) == ("model", str(kept))
    gen = at.session_state["exp_gen"]  # the saved experiment is loaded again into a fresh form
    assert at.selectbox(key=f"ed{gen}.trainer.comparator").value == f"checkpoint:{kept}"
    at.button(key="exp_launch").click().run()  # the saved config passes the launch checks: queued
    assert not at.exception and len(store.list_runs(experiment)) == 2
    shutil.rmtree(kept)  # deleted after saving: the launch checks refuse it, naming the folder
    at.button(key="exp_launch").click().run()
    assert any(f"the checkpoint folder {kept} does not exist" in e.value for e in at.error)
    assert len(store.list_runs(experiment)) == 2
    make_trainer(fast_config()).save_checkpoint(kept)
    at.run()

    at.selectbox(key=f"ed{gen}.trainer.comparator").set_value(f"checkpoint:{deleted}").run()
    assert any(f"the checkpoint folder {deleted} does not exist" in e.value for e in at.error)
    assert at.button(key="exp_save").disabled
    assert store.get_experiment(experiment).config["trainer"]["comparator_checkpoint"] == str(kept)

    at.selectbox(key=f"ed{gen}.trainer.comparator").set_value("history").run()
    assert not at.error
    at.selectbox(key=f"ed{gen}.trainer.algorithm").set_value("madpo").run()  # not iterative: no comparator
    assert not at.exception and not [s for s in at.selectbox if s.key == f"ed{gen}.trainer.comparator"]
    # the comparator settings went with the algorithm (num_iterations, set in the config, is still named)
    assert [e.value for e in at.error][1:] == ["not used by madpo; leave it at its default (6) or choose an "
                                               "algorithm that reads it"]


def test_an_api_comparator_is_configured_in_the_form_and_checked_at_its_fields(app, store: Store,
                                                                              monkeypatch) -> None:
    from tests.app.test_app_centralized_madpo import _column_errors

    experiment = store.create_experiment("iter-api", config=_iter_config()).id
    at = app("experiments", experiment=experiment)
    gen = at.session_state["exp_gen"]
    box = at.selectbox(key=f"ed{gen}.trainer.comparator")
    assert [o.split(":")[0] for o in box.options] == ["current", "current_copy", "model", "history", "api"]
    box.set_value("api").run()
    assert not at.exception
    assert _column_errors(at, f"ed{gen}.trainer.comparator_api_url") == [
        "comparator_policy='api' needs the endpoint's URL; set it"]
    assert at.button(key="exp_save").disabled
    at.text_input(key=f"ed{gen}.trainer.comparator_api_url").input("https://api.example/v1/chat/completions").run()
    at.text_input(key=f"ed{gen}.trainer.comparator_api_key_env").input("COOPLAB_API_KEY_LAB").run()
    at.selectbox(key=f"ed{gen}.trainer.comparator_api_format").set_value("openai_chat").run()
    # the operator has not bound that key to the host: pre-flight names the setting that would
    assert not at.exception and at.button(key="exp_save").disabled
    assert any("the key in COOPLAB_API_KEY_LAB is not sent to api.example" in e.value
               and "COOPLAB_API_KEY_LAB=api.example" in e.value for e in at.error)
    monkeypatch.setenv("COOPLAB_API_HOSTS", "COOPLAB_API_KEY_LAB=api.example")
    at.run()
    assert not at.exception and not at.error and not at.button(key="exp_save").disabled
    at.button(key="exp_save").click().run()
    trainer = store.get_experiment(experiment).config["trainer"]
    assert (trainer["comparator_policy"], trainer["comparator_api_url"], trainer["comparator_api_format"],
            trainer["comparator_api_key_env"]) == ("api", "https://api.example/v1/chat/completions", "openai_chat",
                                                   "COOPLAB_API_KEY_LAB")
    assert "comparator_api_key" not in trainer  # the form offers the variable's name only, never a key


def test_the_iterative_trainers_settings_are_shown_only_for_them(app, store: Store) -> None:
    config = _iter_config()
    experiment = store.create_experiment("iter-fields", config=config).id
    at = app("experiments", experiment=experiment)
    gen = at.session_state["exp_gen"]
    keys = {w.key for w in (*at.text_input, *at.number_input, *at.selectbox, *at.checkbox)}
    assert {f"ed{gen}.trainer.comparator_api_url", f"ed{gen}.trainer.num_iterations",
            f"ed{gen}.trainer.log_reward_distribution"} <= keys
    at.selectbox(key=f"ed{gen}.trainer.algorithm").set_value("madpo").run()
    assert not at.exception
    keys = {w.key for w in (*at.text_input, *at.number_input, *at.selectbox, *at.checkbox)}
    assert f"ed{gen}.trainer.comparator_api_url" not in keys and f"ed{gen}.trainer.log_reward_distribution" not in keys
    assert f"ed{gen}.trainer.num_iterations" in keys  # changed in this draft (2): shown, with its refusal
    assert any("not used by madpo" in e.value for e in at.error)
