"""Config generation of studies: grid size and order, random points reproducible from the study seed,
seeds per point, dotted paths into lists, and invalid points rejected naming the field (pure)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.schema.run_config import parse_run_config
from jobs.study_space import (
    Dimension,
    StudySpaceError,
    generate,
    grid_points,
    parse_space,
    random_points,
    seed_list,
    set_path,
)
from jobs.study_spec import load_study_file, parse_study_spec, study_trials
from tests.jobs.helpers import tiny_config

LR = "trainer.agent_learning_rate"
K = "trainer.num_generations"


def test_a_grid_is_every_combination_first_path_slowest_each_with_every_seed() -> None:
    dims = parse_space({LR: [0.001, 0.01], K: [2, 4, 8]})
    assert grid_points(dims) == [{LR: 0.001, K: 2}, {LR: 0.001, K: 4}, {LR: 0.001, K: 8},
                                 {LR: 0.01, K: 2}, {LR: 0.01, K: 4}, {LR: 0.01, K: 8}]
    trials = generate(tiny_config(), dims, seeds=2, seed=7)
    assert len(trials) == 2 * 3 * 2
    assert [(t.point, t.seed_index, t.seed) for t in trials[:4]] == [(0, 0, 7), (0, 1, 8), (1, 0, 7), (1, 1, 8)]
    last = trials[-1]
    assert last.params == {LR: 0.01, K: 8}
    assert (last.config["trainer"]["agent_learning_rate"], last.config["trainer"]["num_generations"]) == (0.01, 8)
    assert last.config["trainer"]["seed"] == 8 and last.config["trainer"]["max_steps"] == 3  # the base's own
    assert all(parse_run_config(dict(t.config)) for t in trials)  # every config passes the one schema
    assert trials[0].config["trainer"]["seed"] == 7  # the copies do not share nested dicts


def test_random_points_are_reproducible_from_the_study_seed_and_stay_in_range() -> None:
    dims = parse_space({LR: {"loguniform": [1e-4, 1e-2]}, K: {"int": [2, 4]},
                        "trainer.temperature": {"uniform": [0.5, 1.5]}, "agents.0.name": ["a", "b"]})
    first, again, other = random_points(dims, 20, 3), random_points(dims, 20, 3), random_points(dims, 20, 4)
    assert first == again and first != other and len(first) == 20
    assert all(1e-4 <= p[LR] <= 1e-2 and p[K] in (2, 3, 4) and 0.5 <= p["trainer.temperature"] <= 1.5
               for p in first)
    assert {p[K] for p in first} == {2, 3, 4} and {p["agents.0.name"] for p in first} == {"a", "b"}
    # log-uniform: about half the draws below the geometric middle 1e-3 (hand: P = 0.5)
    below = sum(p[LR] < 1e-3 for p in random_points(dims, 400, 0))
    assert 160 < below < 240
    trials = generate(tiny_config(), dims, method="random", samples=5, seeds=[11, 12], seed=3)
    assert [t.params for t in trials[::2]] == random_points(dims, 5, 3)
    assert [t.seed for t in trials[:2]] == [11, 12]


def test_random_points_never_repeat_a_point() -> None:
    lists = parse_space({LR: [0.001, 0.01, 0.1], K: [2, 4]})
    drawn = random_points(lists, 6, 0)  # every one of the 3 x 2 points, in a seeded order
    assert sorted((p[LR], p[K]) for p in drawn) == sorted((lr, k) for lr in (0.001, 0.01, 0.1) for k in (2, 4))
    assert drawn == random_points(lists, 6, 0) and drawn != random_points(lists, 6, 1)
    assert all(p in grid_points(lists) for p in random_points(lists, 2, 5))
    with pytest.raises(StudySpaceError, match="only 6 different points"):
        random_points(lists, 7, 0)
    small = parse_space({K: {"int": [2, 3]}, "agents.0.name": ["a"]})  # a range with two values
    assert sorted(p[K] for p in random_points(small, 2, 0)) == [2, 3]
    with pytest.raises(StudySpaceError, match="could not draw 3 different points"):
        random_points(small, 3, 0)


def test_paths_reach_into_lists_of_agents() -> None:
    config = tiny_config()
    set_path(config, "agents.1.model", "builtin:tiny-qwen2")
    assert config["agents"][1]["model"] == "builtin:tiny-qwen2"
    with pytest.raises(StudySpaceError, match=r"agents\.5 is not an index of a list of 2 \(use 0\.\.1\)"):
        set_path(config, "agents.5.model", "x")
    trials = generate(tiny_config(), parse_space({"agents.1.learning_rate": [0.5]}))
    assert trials[0].config["agents"][1]["learning_rate"] == 0.5 and trials[0].config["agents"][0]["learning_rate"] is None


def test_an_invalid_point_is_rejected_naming_the_point_and_the_field() -> None:
    with pytest.raises(StudySpaceError) as err:
        generate(tiny_config(), parse_space({LR: [0.001, -1.0]}), seeds=2)
    message = str(err.value)
    assert message.startswith(f"point 1 ({LR}=-1.0) gives an invalid run config")
    assert f"{LR}: Input should be greater than 0" in message
    with pytest.raises(StudySpaceError, match=r"trainer\.agent_learning_rat: unknown field; did you mean "
                                              r"'agent_learning_rate'"):
        generate(tiny_config(), parse_space({"trainer.agent_learning_rat": [0.1]}))
    with pytest.raises(StudySpaceError, match=r"base config is invalid:\nagents: "):
        generate({"agents": []}, parse_space({LR: [0.1]}))


@pytest.mark.parametrize(("space", "message"), [
    ({LR: []}, r"space\.trainer\.agent_learning_rate: give at least one value"),
    ({LR: {"uniform": [2, 1]}}, r"uniform needs \[low, high\] numbers with low <= high"),
    ({LR: {"loguniform": [0, 1]}}, r"and low > 0"),
    ({LR: {"normal": [0, 1]}}, r"give a list of values, or one of"),
    ({"trainer.seed": [1, 2]}, r"seeds are the study's own axis; set 'seeds'"),
    ({"trainer..x": [1]}, r"is not a dotted field path"),
    ({}, r"space: give at least one field path"),
])
def test_bad_spaces_name_the_path(space: dict, message: str) -> None:
    with pytest.raises(StudySpaceError, match=message):
        parse_space(space)


def test_grid_refuses_ranges_and_seeds_must_be_distinct() -> None:
    with pytest.raises(StudySpaceError, match=r"grid search needs a list of values, not a range"):
        grid_points([Dimension(LR, kind="uniform", low=0.1, high=0.2)])
    with pytest.raises(StudySpaceError, match=r"method: 'bayes' is not a search method"):
        generate(tiny_config(), parse_space({LR: [0.1]}), method="bayes")
    with pytest.raises(StudySpaceError, match=r"seeds: give distinct seeds"):
        seed_list([1, 1], 0)
    assert seed_list(3, 10) == [10, 11, 12] and seed_list([5, 2], 0) == [5, 2]
    assert math.isclose(parse_space({LR: {"loguniform": [1e-4, 1e-2]}})[0].low, 1e-4)


def test_a_study_file_reads_its_base_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.yaml").write_text("agents: [{name: first}, {name: second}]\n"
                                                    "task: {name: quickstart}\ntrainer: {max_steps: 2}\n")
    study = tmp_path / "study.yaml"
    study.write_text(f"name: s\nbase: configs/base.yaml\nspace: {{{LR}: [0.001, 0.01]}}\nseeds: 3\n"
                     "max_concurrent: 2\nearly_stopping: {min_steps: 2}\n")
    spec = load_study_file(study)
    assert spec.max_concurrent == 2 and spec.early_stopping.min_steps == 2 and spec.early_stopping.min_trials == 3
    assert len(study_trials(spec)) == 6
    with pytest.raises(StudySpaceError, match=r"max_concurrent: Input should be greater than or equal to 1"):
        parse_study_spec({**spec.model_dump(), "max_concurrent": 0})
    with pytest.raises(StudySpaceError, match=r"early_stopping\.min_step: unknown field"):
        parse_study_spec({**spec.model_dump(), "early_stopping": {"min_step": 2}})
    study.write_text("name: s\nbase: nowhere.yaml\nspace: {}\n")
    with pytest.raises(StudySpaceError, match=r"base: config file not found: .*nowhere\.yaml"):
        load_study_file(study)
