"""Held-out metrics across runs: Compare side by side (each run's newest evaluation of record as mean
± s.e., seed groups as the mean over their evaluated seeds ± spread), and a study ranked by a held-out
metric (with the best point promoted by it); the cells by hand."""

from __future__ import annotations

import pytest

from db.evaluation_records import EvaluationInput
from db.evaluation_store import EvaluationStore
from db.store import Store
from db.study_store import StudyStore


def _evaluate(store: Store, run_id: int, value: float, *, step: int = 4, **fields) -> None:
    values = dict(run_id=run_id, split="eval", settings={"seed": 0, "greedy": True, "samples": 1, "items": 4},
                  metrics={"eval/reward_mean": value, "eval/pass@1": value / 2},
                  standard_errors={"eval/reward_mean": 0.05, "eval/pass@1": 0.01}, per_item=[],
                  checkpoint_step=step)
    values.update(fields)
    EvaluationStore(store).add_evaluation(EvaluationInput(**values))


def test_group_cells_by_hand() -> None:
    from app.held_out import group_cell

    assert group_cell([0.2, 0.4]) == "0.3000 ± 0.1000 (n=2)"  # stdev 0.1414 / sqrt(2)
    assert group_cell([0.2, 0.4, float("nan")], "minmax") == "0.3000 [0.2000, 0.4000] (n=2)"
    assert group_cell([0.5]) == "0.5000 ± 0.0000 (n=1)" and group_cell([]) == ""
    with pytest.raises(ValueError, match="unknown spread 'iqr'"):
        group_cell([1.0], "iqr")


def test_compare_shows_held_out_metrics_with_seed_groups(app, store: Store, experiment: int, seed,
                                                         make_config) -> None:
    runs = [seed(experiment, status="succeeded", steps=2, config=make_config(seed=s)) for s in (1, 2, 3)]
    other = seed(experiment, status="succeeded", steps=2, config=make_config(agent_learning_rate=1e-4))
    _evaluate(store, runs[0], 0.1, step=2)
    _evaluate(store, runs[0], 0.2)  # the newest counts
    _evaluate(store, runs[1], 0.4)
    _evaluate(store, runs[1], 0.9, split="train")  # not held out
    _evaluate(store, other, 0.5, kind="team_analysis", label="trained", analysis="a")  # not a plain evaluation
    _evaluate(store, other, 0.5)
    at = app("compare", runs=",".join(str(i) for i in [*runs, other]))
    assert not at.exception
    assert at.multiselect(key="cmp_held_out_keys").value == ["eval/reward_mean", "eval/pass@1"]
    groups, per_run = at.dataframe[0].value, at.dataframe[1].value
    assert groups["seeds evaluated"].tolist() == ["2 of 3", "1 of 1"]
    assert groups["eval/reward_mean"].tolist() == ["0.3000 ± 0.1000 (n=2)", "0.5000 ± 0.0000 (n=1)"]
    assert groups["eval/pass@1"].tolist() == ["0.1500 ± 0.0500 (n=2)", "0.2500 ± 0.0000 (n=1)"]
    assert per_run["eval/reward_mean"].tolist() == ["0.2000 ± 0.0500", "0.4000 ± 0.0500", "", "0.5000 ± 0.0500"]
    assert per_run["checkpoint"].tolist() == ["4", "4", "no evaluation yet", "4"]
    at.radio(key="cmp_held_out_spread").set_value("minmax").run()
    assert at.dataframe[0].value["eval/reward_mean"].tolist()[0] == "0.3000 [0.2000, 0.4000] (n=2)"
    at.toggle(key="cmp_by_seed").set_value(False).run()  # one row per run only
    assert at.dataframe[0].value["run"].tolist()[0].startswith(f"demo #{runs[0]}")


def test_compare_without_evaluations_says_how_to_get_them(app, store: Store, experiment: int, seed) -> None:
    runs = [seed(experiment, status="succeeded", steps=1) for _ in range(2)]
    at = app("compare", runs=",".join(map(str, runs)))
    assert not at.exception
    assert any("None of these runs has an evaluation of record yet" in i.value for i in at.info)


def test_a_study_ranked_by_a_held_out_metric(app, store: Store, experiment: int, make_config) -> None:
    from tests.app.test_app_studies import _finished_study

    study_id = _finished_study(store, experiment, make_config)
    held_out = {(0, 0): 0.9, (0, 1): 0.7, (1, 0): 0.1, (1, 1): 0.3}  # the other order than training's
    for trial in StudyStore(store).trials(study_id):
        _evaluate(store, trial.run_id, held_out[trial.point, trial.seed_index])
    at = app("studies", study=study_id)
    assert not at.exception
    assert at.selectbox(key="st_held_metric").value == "eval/reward_mean"
    assert at.dataframe[1].value["point"].tolist() == [1, 0]  # by mean final training reward
    at.selectbox(key="st_rank").set_value("eval/reward_mean held-out mean").run()
    table = at.dataframe[1].value
    assert table["point"].tolist() == [0, 1]
    assert table["eval/reward_mean held-out mean"].tolist() == pytest.approx([0.8, 0.2])
    assert table["eval/reward_mean held-out std"].tolist() == pytest.approx([0.1414213562] * 2)
    assert table["eval/reward_mean held-out n"].tolist() == [2, 2]
    assert any("**Best point** by mean held-out eval" in m.value for m in at.markdown)
    at.button(key="st_promote").click().run()
    promoted = store.find_experiment("lr: point 0")
    assert promoted is not None and promoted.config["trainer"]["agent_learning_rate"] == 0.001
