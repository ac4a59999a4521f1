"""The Studies page: define a study from the schema's fields (every generated config validated before
queuing), watch its children, read its results (table, curves with bands, scatter, CSV), compare a
point's seeds, and promote the best point to a new experiment."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from db import states
from db.store import Store
from db.study_store import StudyStore
from jobs.study_space import generate, parse_space

LR = "trainer.agent_learning_rate"


MODEL = "agents.1.model"
ALGORITHM = "trainer.algorithm"


def _values(at, path: str):
    return at.text_input(key=f"st_values.{path}")


def test_define_validates_every_config_then_queues_the_study(app, store: Store, experiment: int) -> None:
    at = app("studies")
    assert not at.exception
    assert at.multiselect(key="st_fields").value == [LR]
    assert _values(at, LR).value == "1.7e-06, 5e-06, 1.5e-05"  # around the base's rate
    assert any("3 points × 2 seeds = 6 runs, every config valid" in s.value for s in at.success)
    _values(at, LR).set_value("").run()
    assert [e.value for e in at.error] == ["give at least one value (comma-separated)"]
    assert at.button(key="st_queue").disabled
    at.radio(key="st_method").set_value("random").run()
    _values(at, LR).set_value("0.001, 0.01").run()
    [error] = at.error  # the study as a whole: 8 random points from 2 values
    assert error.value.startswith("samples: these lists of values make only 2 different points")
    assert at.button(key="st_queue").disabled
    at.radio(key="st_method").set_value("grid").run()
    at.multiselect(key="st_fields").set_value([LR, "trainer.num_generations"]).run()
    assert _values(at, "trainer.num_generations").value == "2"  # starts as the base's own value
    _values(at, "trainer.num_generations").set_value("2, 4").run()
    assert not at.error
    assert any("4 points × 2 seeds = 8 runs, every config valid" in s.value for s in at.success)
    at.button(key="st_queue").click().run()
    assert not at.exception and not at.error
    (study,) = StudyStore(store).list_studies()
    trials = StudyStore(store).trials(study.id)
    assert study.name == "demo sweep" and len(trials) == 8 and study.max_concurrent == 2
    assert sorted(t.status for t in trials).count(states.QUEUED) == 2  # sent to the queue, the rest wait
    assert {t.params[LR] for t in trials} == {0.001, 0.01} and {t.seed for t in trials} == {0, 1}
    assert [t.params["trainer.num_generations"] for t in trials[:4:2]] == [2, 4]  # the first field varies slowest


def test_each_field_has_one_values_box_and_a_bad_value_is_named_under_it(app, experiment: int) -> None:
    at = app("studies")
    at.multiselect(key="st_fields").set_value([LR, MODEL, ALGORITHM]).run()
    assert not at.exception
    assert _values(at, MODEL).value == "builtin:tiny-llama" and _values(at, ALGORITHM).value == "magrpo"
    assert _values(at, ALGORITHM).placeholder.startswith("one or more of: magrpo, grpo")
    _values(at, LR).set_value("0.001, -1, -2").run()
    _values(at, ALGORITHM).set_value("magrpo, sideways").run()
    _values(at, MODEL).set_value("builtin:tiny-llama, builtin:tiny-llama").run()
    under = {}
    for column in at.columns:
        boxes = [box.key for box in column.text_input if box.key.startswith("st_values.")]
        if len(boxes) == 1:
            under[boxes[0].removeprefix("st_values.")] = [e.value for e in column.error]
    assert under == {LR: ["-1: Input should be greater than 0 · -2: Input should be greater than 0"],  # all at once
                     MODEL: ["builtin:tiny-llama given twice; list each value once"],
                     ALGORITHM: [under[ALGORITHM][0]]}
    assert under[ALGORITHM][0].startswith("sideways: Input should be 'magrpo', 'grpo'")
    assert len(at.error) == 3 and not at.success and at.button(key="st_queue").disabled
    _values(at, LR).set_value("0.001").run()
    _values(at, MODEL).set_value("builtin:tiny-llama, builtin:tiny-qwen2").run()
    _values(at, ALGORITHM).set_value("magrpo, maremax").run()
    assert not at.error
    assert any("4 points × 2 seeds = 8 runs, every config valid" in s.value for s in at.success)


def _finished_study(store: Store, experiment: int, make_config) -> int:
    base = make_config()
    trials = generate(base, parse_space({LR: [0.001, 0.01]}), seeds=2)
    studies = StudyStore(store)
    study = studies.create_study("lr", {"base": base, "space": {LR: [0.001, 0.01]}, "objective": "train/reward_mean"},
                                 trials,
                                 max_concurrent=4)
    finals = {(0, 0): 0.2, (0, 1): 0.4, (1, 0): 0.7, (1, 1): 0.9}
    for run_id in studies.claim_slots(study.id):
        trial = studies.trial_of_run(run_id)
        store.transition(run_id, states.STARTING)
        store.transition(run_id, states.RUNNING)
        for step in (1, 2):
            # an episode as the engine reports it (log_step reads these attributes)
            episode = SimpleNamespace(sample_index=0, split="train", item_index=0, turns=(SimpleNamespace(
                turn=1, agent_index=0, agent_name="writer", prompt="split the alphabet",
                completion=f"reply of point {trial.point} seed {trial.seed} at step {step}", reward=0.5, ret=0.5,
                advantage=0.0),))
            store.log_step(run_id, step, step, {"train/reward_mean": finals[trial.point, trial.seed_index] * step / 2},
                           [episode])
        store.transition(run_id, states.SUCCEEDED)
    return study.id


def test_watch_results_and_promote_the_best_point(app, store: Store, experiment: int, make_config, figures) -> None:
    study_id = _finished_study(store, experiment, make_config)
    at = app("studies", study=study_id)
    assert not at.exception
    children = at.dataframe[0].value
    assert children["status"].tolist() == ["succeeded"] * 4 and children["seed"].tolist() == [0, 1, 0, 1]
    table = at.dataframe[1].value
    assert table["point"].tolist() == [1, 0]  # ranked by mean final reward, largest first
    assert table["train/reward_mean final mean"].tolist() == pytest.approx([0.8, 0.3])
    assert table["train/reward_mean final std"].tolist() == pytest.approx([0.1414213562, 0.1414213562])
    at.toggle(key="st_desc").set_value(False).run()
    assert at.dataframe[1].value["point"].tolist() == [0, 1]
    curves, scatter, _ = figures(at)
    means = [t for t in curves["data"] if t.get("showlegend") is not False]
    assert [t["name"] for t in means][:2] == ["point 0: agent_learning_rate=0.001", "point 1: agent_learning_rate=0.01"]
    assert means[1]["y"] == pytest.approx([0.4, 0.8])
    assert scatter["data"][0]["x"] == [0.001, 0.01] and scatter["data"][0]["y"] == pytest.approx([0.3, 0.8])
    assert at.get("download_button")
    # point 0's two seeds side by side at their latest shared step
    assert [c.text[0].value for c in at.chat_message] == ["reply of point 0 seed 0 at step 2",
                                                          "reply of point 0 seed 1 at step 2"]
    at.button(key="st_promote").click().run()
    promoted = store.find_experiment("lr: point 1")
    assert promoted is not None and promoted.config["trainer"]["agent_learning_rate"] == 0.01
    assert promoted.config["trainer"]["seed"] == 0 and promoted.config["name"] == "lr: point 1"


def test_parallel_coordinates_and_importance_of_the_parameters(app, store: Store, experiment: int, make_config,
                                                                figures) -> None:
    study_id = _finished_study(store, experiment, make_config)
    at = app("studies", study=study_id)
    assert not at.exception
    [parcoords] = [f["data"][0] for f in figures(at) if f["data"][0]["type"] == "parcoords"]
    lr, objective = parcoords["dimensions"]
    assert lr["label"] == LR and sorted(lr["values"]) == [0.001, 0.001, 0.01, 0.01]  # a factor 10: not log10
    assert objective["label"] == "train/reward_mean"
    pairs = sorted(zip(lr["values"], objective["values"], strict=True))
    assert [x for x, _ in pairs] == [0.001, 0.001, 0.01, 0.01] and [y for _, y in pairs] == pytest.approx(
        [0.2, 0.4, 0.7, 0.9])
    [row] = at.dataframe[2].value.to_dict("records")
    # finals 0.2, 0.4 | 0.7, 0.9: mean 0.55, total SS 0.29, between 2 * 0.25**2 * 2 = 0.25 -> 25/29
    assert row["parameter"] == LR and row["bins"] == 2 and row["children"] == 4
    assert row["importance (η², variance explained)"] == pytest.approx(25 / 29)
    assert any("fraction of the objective's variance explained" in c.value for c in at.caption)


def test_the_transcripts_page_compares_the_seeds_of_a_study_point(app, store: Store, experiment: int,
                                                                  make_config) -> None:
    _finished_study(store, experiment, make_config)
    at = app("transcripts")
    assert not at.exception
    at.selectbox(key="tr_seed_point").set_value(1).run()
    (section,) = [e for e in at.expander if e.label == "Compare the seeds of a study point"]
    assert [c.text[0].value for c in section.chat_message] == ["reply of point 1 seed 0 at step 2",
                                                               "reply of point 1 seed 1 at step 2"]
    at.select_slider(key="tr_seed_step_1_1").set_value(1).run()
    (section,) = [e for e in at.expander if e.label == "Compare the seeds of a study point"]
    assert [c.text[0].value for c in section.chat_message][0] == "reply of point 1 seed 0 at step 1"


def test_a_tie_is_no_single_best_point() -> None:
    from app.components.study_results import top_points
    from jobs.study_results import PointResult
    from jobs.study_rules import spread

    def point(index: int, *finals: float) -> PointResult:
        return PointResult(point=index, params={LR: index}, statuses={}, run_ids=(),
                           final={"train/reward_mean": spread(finals)})

    tied = [point(0, 0.5, 0.7), point(1, 1.0, 0.2), point(2, 0.6, 0.6), point(3, 0.1, 0.1)]
    assert [r.point for r in top_points(tied, "train/reward_mean")] == [0, 1, 2]  # three means of 0.6
    assert [r.point for r in top_points(tied[2:], "train/reward_mean")] == [2]
    assert top_points([], "train/reward_mean") == []


def test_another_base_experiment_restarts_the_name_and_values_from_it(app, store: Store, experiment: int,
                                                                       make_config) -> None:
    other = store.create_experiment("fast", config=make_config("fast", agent_learning_rate=1e-3)).id
    at = app("studies")
    assert at.selectbox(key="st_base").value == other  # the newest first
    assert at.text_input(key="st_name").value == "fast sweep"
    assert _values(at, LR).value == "0.00033, 0.001, 0.003"
    at.selectbox(key="st_base").set_value(experiment).run()
    assert not at.exception
    assert at.text_input(key="st_name").value == "demo sweep"  # was "fast sweep"
    assert _values(at, LR).value == "1.7e-06, 5e-06, 1.5e-05"  # around the new base's rate, not the old one's
    at.text_input(key="st_name").set_value("my own name").run()
    at.selectbox(key="st_base").set_value(other).run()
    assert at.text_input(key="st_name").value == "my own name"  # a typed name stays
    assert not [w for w in at.warning if "No worker serves" in w.value]
    at.text_input(key="st_device").set_value("cuda:7").run()  # no such device here: said at the field
    assert [w.value for w in at.warning if "No worker serves" in w.value][0].startswith(
        "No worker serves `cuda:7` now (workers serve cpu)")
    assert _values(at, LR).value == "0.00033, 0.001, 0.003"
