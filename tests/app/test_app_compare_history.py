"""Compare: the config diff fills in defaults before comparing; a resumed attempt is part of its run's
history, not another seed, and its curve is the whole history; the curves' choices outlive a session."""

from __future__ import annotations

import pytest

from app.context import task_catalog
from db.store import Store


def test_config_diff_fills_in_defaults_first(app, store: Store, experiment: int, seed, make_config) -> None:
    preset = make_config()
    preset["task"]["params"] = {}  # as a preset writes it: the task's defaults implied
    filled = make_config(agent_learning_rate=1e-4)
    filled["task"]["params"] = task_catalog()["quickstart"].default_params()  # as the form saves it
    assert filled["task"]["params"]  # the quick start has parameters with defaults
    a = seed(experiment, status="succeeded", steps=2, config=preset)
    b = seed(experiment, status="succeeded", steps=2, config=filled)
    at = app("compare", runs=f"{a},{b}")
    assert not at.exception
    diff = at.dataframe[0].value
    assert diff["field"].tolist() == ["trainer.agent_learning_rate"]  # no task.params.* row "—" vs a default


def _resumed_pair(store: Store, experiment: int, seed, make_config, **other) -> tuple[int, int, int]:
    """#a: another run (seed 5, ``other`` trainer settings); #b stopped at step 6 (seed 9), resumed as #c
    from step 5 to 10."""
    a = seed(experiment, status="succeeded", steps=10, config=make_config(seed=5, **other), reward=lambda step: 0.0)
    b = seed(experiment, status="stopped", steps=6, config=make_config(seed=9))
    c = store.create_run(experiment, dict(store.get_run(b).config), "cpu", total_steps=10, resumed_from=b).id
    store.transition(c, "starting")
    store.transition(c, "running")
    for step in range(5, 11):
        store.log_step(c, step, step * 4, {"train/reward_mean": 1.0 + step}, [], wall_time=1.8e9 + step)
    return a, b, c


def test_a_resumed_attempt_is_not_a_seed_and_is_compared_as_one_history(app, store: Store, experiment: int, seed,
                                                                        make_config, figures) -> None:
    a, b, c = _resumed_pair(store, experiment, seed, make_config, agent_learning_rate=1e-4)
    at = app("compare", run=c)
    assert not at.exception
    # preselected: the resumed run and another run, never two attempts of one history
    assert at.multiselect(key="cmp_runs").value == [c, a]
    assert at.toggle(key="cmp_by_seed").value is False  # #b and #c are one run with one seed: no seed group
    at.slider(key="cmp_ema").set_value(0.0).run()
    [figure] = figures(at)
    lines = {t["name"]: t for t in figure["data"] if "raw" not in t["name"]}
    assert set(lines) == {f"demo #{c} (attempts #{b} → #{c}) · seed 9", f"demo #{a} · seed 5"}
    history = lines[f"demo #{c} (attempts #{b} → #{c}) · seed 9"]
    assert history["x"] == list(range(1, 11))  # the whole history, not step 5 on
    assert history["y"][:4] == pytest.approx([0.1, 0.2, 0.3, 0.4])  # the first attempt's own steps
    assert history["y"][4:] == [1.0 + s for s in range(5, 11)]  # the later attempt wins where both logged


def test_two_attempts_of_one_run_are_one_history(app, store: Store, experiment: int, seed, make_config,
                                                 figures) -> None:
    a, b, c = _resumed_pair(store, experiment, seed, make_config)  # #a differs from #b/#c only by seed
    at = app("compare", runs=f"{b},{c},{a}")
    assert not at.exception
    assert any(f"#{b} and #{c} are attempts of one run" in m.value for m in at.caption)
    [figure] = figures(at)
    [mean] = [t for t in figure["data"] if t.get("showlegend") is not False]
    assert mean["name"] == f"demo (2 seeds: #{c}, #{a})"  # two seeds: 9 and 5, never #{c} and #{b}
    assert mean["x"] == list(range(1, 11))  # #c's history from step 1, not from its resume at step 5


def test_chosen_curves_survive_a_new_session(app, store: Store, experiment: int, seed, make_config) -> None:
    a = seed(experiment, status="succeeded", steps=2, config=make_config(seed=1))
    b = seed(experiment, status="succeeded", steps=2, config=make_config(seed=2, agent_learning_rate=1e-4))
    at = app("compare", runs=f"{a},{b}")
    assert store.saved_view("owner", "compare_charts", "all") is None  # the defaults shown save nothing
    at.multiselect(key="cmp_metrics").set_value(["agent/writer/loss", "train/reward_mean"]).run()
    at.slider(key="cmp_ema").set_value(0.0).run()
    at.radio(key="cmp_x").set_value("env_step").run()
    assert store.saved_view("owner", "compare_charts", "all") == {
        "metrics": ["agent/writer/loss", "train/reward_mean"], "x": "env_step", "ema": 0.0}
    # another browser saves later, with a metric these runs lack and a weight out of the slider's range;
    # this session's reruns change nothing, so they write nothing over it
    store.save_view("owner", "compare_charts", "all", {"metrics": ["gone/metric", "agent/editor/loss"],
                                                       "x": "env_step", "ema": 7})
    at.run()
    assert store.saved_view("owner", "compare_charts", "all")["ema"] == 7
    again = app("compare", runs=f"{a},{b}")  # a new session: the saved choice, what does not fit dropped
    assert not again.exception
    assert again.multiselect(key="cmp_metrics").value == ["agent/editor/loss"]
    assert again.radio(key="cmp_x").value == "env_step" and again.slider(key="cmp_ema").value == 0.6
