"""The experiment form offers ``collaboration_mode`` (from the schema) and validates it at its fields:
centralized MADPO needs every later role to share the first's weights, and an algorithm that cannot
train one joint model says which can; a valid centralized draft is saved and queued."""

from __future__ import annotations

from db.store import Store
from engine.schema.run_config import RunConfig


def _madpo_config() -> dict:
    return RunConfig.model_validate({
        "name": "joint", "agents": [{"name": "first", "model": "builtin:tiny-llama"},
                                    {"name": "second", "model": "builtin:tiny-llama"}],
        "task": {"name": "quickstart", "params": {"centralized_protocol": "halves"}},
        "trainer": {"algorithm": "madpo", "preference_num_candidates": 4, "preference_pairs_per_sample": 2,
                    "max_new_tokens": 6},
    }).model_dump(mode="json")


def _column_errors(at, key: str) -> list[str]:
    """The errors printed in the form column that holds the widget ``key``."""
    for column in at.columns:
        if any(w.key == key for w in (*column.number_input, *column.text_input, *column.selectbox)):
            return [e.value for e in column.error]
    raise AssertionError(f"no column holds widget {key}")


def test_centralized_madpo_is_chosen_in_the_form_and_checked_at_its_fields(app, store: Store) -> None:
    experiment = store.create_experiment("joint", config=_madpo_config()).id
    at = app("experiments", experiment=experiment)
    assert not at.exception and not at.error
    gen = at.session_state["exp_gen"]
    mode = at.selectbox(key=f"ed{gen}.trainer.collaboration_mode")
    assert mode.value is None and mode.options == ["(default)", "decentralized", "centralized"]

    mode.set_value("centralized").run()  # the second role still has weights of its own
    assert _column_errors(at, f"ed{gen}.agent1.share") == [
        "madpo with collaboration_mode='centralized' trains one model for every role; set it to 'first' (or set "
        "trainer.collaboration_mode to 'decentralized')"]
    assert at.button(key="exp_save").disabled

    at.selectbox(key=f"ed{gen}.agent1.share").set_value("first").run()
    assert not at.exception and not at.error and not at.button(key="exp_save").disabled
    at.button(key="exp_save").click().run()
    saved = store.get_experiment(experiment).config
    assert saved["trainer"]["collaboration_mode"] == "centralized" and saved["agents"][1]["share_weights_with"] == "first"
    at.button(key="exp_launch").click().run()  # passes the launch checks: queued
    assert not at.exception and [r.status for r in store.list_runs(experiment)] == ["queued"]

    gen = at.session_state["exp_gen"]
    at.selectbox(key=f"ed{gen}.trainer.algorithm").set_value("magrpo").run()
    assert not at.exception
    # the column also holds other settings' fields (which ones depends on the catalog's layout); the
    # preference settings magrpo does not read are named at their own fields
    assert ("'centralized' (one model writes every role) is supported by madpo, madpo_iter, marlhf, marlhf_iter and "
            "centralized_magrpo, not by magrpo, which trains a team of separate agents; set trainer.algorithm to one "
            "of those, or leave collaboration_mode empty (decentralized)") in _column_errors(
        at, f"ed{gen}.trainer.collaboration_mode")
    assert at.button(key="exp_save").disabled
