"""A study cannot ask for any size: its points, seeds and runs are counted arithmetically before
anything is expanded, and over an operator limit (``COOPLAB_MAX_STUDY_*``) it is refused at once,
naming the count, the limit and the setting; expansion stops after ``COOPLAB_MAX_STUDY_EXPAND_S``;
numbers written as ``1e9`` or ``1.0e+9`` are read as the numbers they are, and fractions refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from db.study_store import StudyStore
from engine.schema.run_config import parse_run_config
from jobs.settings import Settings
from jobs.studies import create_study
from jobs.study_limits import StudyLimits, study_limits
from jobs.study_space import StudySpaceError, generate, parse_space
from jobs.study_spec import load_study_file, parse_study_spec, study_trials
from tests.jobs.helpers import tiny_config

LR = "trainer.agent_learning_rate"


def _spec(**fields: object) -> dict:
    return {"name": "caps", "base": tiny_config(), "space": {LR: [0.001, 0.01]}, **fields}


def _refused(call, *args, **kwargs) -> str:
    started = time.monotonic()
    with pytest.raises(StudySpaceError) as caught:
        call(*args, **kwargs)
    assert time.monotonic() - started < 1.0, "refused only after expanding"
    return str(caught.value)


def test_a_huge_grid_is_refused_by_its_count_before_any_point_is_expanded() -> None:
    validated: list[dict] = []

    def validate(config: dict):
        validated.append(config)
        return parse_run_config(config)

    # ten fields of ten values: 10^10 points (counted before any path is set in a config)
    space = parse_space({f"trainer.field_{i}": list(range(10)) for i in range(10)})
    message = _refused(generate, tiny_config(), space, seeds=3, validate=validate, limits=StudyLimits())
    assert "10,000,000,000 points" in message and "limit of 1,000" in message, message
    assert "COOPLAB_MAX_STUDY_POINTS" in message
    assert validated == []  # refused before a single config was built, the base included


@pytest.mark.parametrize("seeds", [10**9, 1e9, "1e9", "1.0e9"])
def test_a_billion_seeds_is_refused_at_once_however_written(seeds: object) -> None:
    spec = parse_study_spec(_spec(seeds=seeds))
    message = _refused(study_trials, spec, limits=StudyLimits())
    assert message.startswith("seeds: 1,000,000,000 seeds per point, over the limit of 100"), message
    assert "COOPLAB_MAX_STUDY_SEEDS" in message


def test_a_billion_seeds_in_a_study_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(f"name: caps\nbase: {{name: x, agents: [{{name: a}}], task: {{name: quickstart}}}}\n"
                    f"space: {{{LR}: [0.001]}}\nseeds: 1e9\n")
    message = _refused(study_trials, load_study_file(path), limits=StudyLimits())
    assert "1,000,000,000 seeds" in message and "COOPLAB_MAX_STUDY_SEEDS" in message


@pytest.mark.parametrize(("field", "value"), [("seeds", 2.5), ("samples", "1.5e3x"), ("seeds", [1, 2.5]),
                                              ("max_concurrent", 0.5), ("seeds", True)])
def test_a_count_that_is_not_a_whole_number_is_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(StudySpaceError) as caught:
        parse_study_spec(_spec(**{field: value}))
    assert str(caught.value).startswith(f"{field}") and "whole number" in str(caught.value), caught.value


def test_whole_numbers_written_as_floats_are_read_as_integers() -> None:
    spec = parse_study_spec(_spec(seeds=3.0, samples="2e0", max_concurrent=2.0, method="random"))
    assert (spec.seeds, spec.samples, spec.max_concurrent) == (3, 2, 2)
    assert isinstance(spec.seeds, int) and isinstance(spec.samples, int)


def test_random_points_and_runs_are_capped_naming_count_limit_and_setting() -> None:
    random = parse_study_spec(_spec(method="random", samples=10**6, space={LR: {"uniform": [0.001, 0.01]}}))
    message = _refused(study_trials, random, limits=StudyLimits())
    assert message.startswith("samples: 1,000,000 random points, over the limit of 1,000"), message
    assert "COOPLAB_MAX_STUDY_POINTS" in message
    grid = parse_study_spec(_spec(space={LR: [0.001, 0.002, 0.003, 0.004]}, seeds=3))
    message = _refused(study_trials, grid, limits=StudyLimits(max_runs=10))
    assert "4 points x 3 seeds = 12 runs, over the limit of 10" in message and "COOPLAB_MAX_STUDY_RUNS" in message
    assert len(study_trials(grid, limits=StudyLimits(max_runs=12))) == 12  # at the limit: fine


def test_expansion_stops_after_its_time_limit() -> None:
    now = [0.0]

    def slow_validate(config: dict):
        now[0] += 1.0  # each point costs a second on this clock
        return parse_run_config(config)

    space = parse_space({LR: [0.001, 0.002, 0.003, 0.004, 0.005]})
    with pytest.raises(StudySpaceError) as caught:
        generate(tiny_config(), space, validate=slow_validate, limits=StudyLimits(max_expand_s=2.5),
                 clock=lambda: now[0])
    message = str(caught.value)
    assert "more than 2.5 s" in message and "COOPLAB_MAX_STUDY_EXPAND_S" in message, message
    assert "3 of 5 points checked" in message  # the base is validated before the clock starts


def test_the_limits_are_operator_settings(monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_STUDY_POINTS", "5")
    monkeypatch.setenv("COOPLAB_MAX_STUDY_SEEDS", "7")
    monkeypatch.setenv("COOPLAB_MAX_STUDY_RUNS", "20")
    monkeypatch.setenv("COOPLAB_MAX_STUDY_EXPAND_S", "9.5")
    assert study_limits(Settings()) == StudyLimits(max_points=5, max_seeds=7, max_runs=20, max_expand_s=9.5)


def test_a_study_over_a_limit_stores_nothing(jobs_env, store, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_STUDY_SEEDS", "2")
    message = _refused(create_study, _spec(seeds=3), settings=Settings())
    assert "3 seeds per point, over the limit of 2" in message and "COOPLAB_MAX_STUDY_SEEDS" in message
    monkeypatch.setenv("COOPLAB_MAX_STUDY_SEEDS", "100")
    monkeypatch.setenv("COOPLAB_MAX_STUDY_POINTS", "1")
    message = _refused(create_study, _spec(), settings=Settings())
    assert "the grid makes 2 points" in message and "COOPLAB_MAX_STUDY_POINTS" in message
    assert StudyStore(store).list_studies() == [] and store.list_runs() == []
