"""The Studies page's Define tab counts a study before it expands it: one over an operator limit
(``COOPLAB_MAX_STUDY_*``) is refused at once, naming the count, the limit and the setting; a study
within the limits is expanded once, not again on every rerun; a values box with more values than a
study may have points is refused before its values are read."""

from __future__ import annotations

import time

import pytest
import streamlit as st

import app.study_form as study_form
import jobs.study_space as study_space
from app.study_form import parse_values, study_preview
from jobs.study_limits import StudyLimits
from jobs.study_space import StudySpaceError

LR = "trainer.agent_learning_rate"
K = "trainer.num_generations"


def _values(at, path: str):
    return at.text_input(key=f"st_values.{path}")


def test_a_huge_grid_is_refused_at_once_in_the_define_tab(app, experiment: int, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_STUDY_POINTS", "150")
    at = app("studies")
    at.multiselect(key="st_fields").set_value([LR, K]).run()
    _values(at, LR).set_value(", ".join(f"{(i + 1) / 10**5:g}" for i in range(100))).run()
    started = time.monotonic()
    _values(at, K).set_value(", ".join(str(2 + i) for i in range(100))).run()
    assert time.monotonic() - started < 10  # counted, not expanded (10,000 points x 2 seeds)
    assert not at.exception
    [error] = at.error
    assert "the grid makes 10,000 points" in error.value and "limit of 150" in error.value, error.value
    assert "COOPLAB_MAX_STUDY_POINTS" in error.value
    assert at.button(key="st_queue").disabled and not at.success


def test_the_define_tab_expands_a_study_once_not_on_every_rerun(app, experiment: int, monkeypatch) -> None:
    calls: list[int] = []
    real = study_form.study_trials

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(study_form, "study_trials", counted)
    st.cache_data.clear()  # the page's cache outlives a test: an earlier one may have checked this study
    at = app("studies")
    assert any("3 points × 2 seeds = 6 runs, every config valid" in s.value for s in at.success)
    at.run()
    at.run()
    assert len(calls) == 1, calls
    _values(at, LR).set_value("0.001, 0.01").run()  # another study: expanded (once)
    at.run()
    assert len(calls) == 2 and any("2 points × 2 seeds = 4 runs" in s.value for s in at.success)


def test_a_preview_over_a_limit_is_refused_without_expanding(monkeypatch) -> None:
    for expands in ("grid_points", "random_points", "seed_list", "point_config"):
        monkeypatch.setattr(study_space, expands, lambda *a, **k: pytest.fail("expanded"))
    spec = {"name": "s", "base": {}, "space": {f"trainer.field_{i}": list(range(10)) for i in range(10)}}
    count, problem = study_preview(spec, StudyLimits())
    assert count == 0 and "10,000,000,000 points" in problem and "COOPLAB_MAX_STUDY_POINTS" in problem
    count, problem = study_preview({**spec, "space": {LR: [0.1]}, "seeds": "1e9"}, StudyLimits())
    assert count == 0 and "1,000,000,000 seeds per point" in problem


def test_a_values_box_with_too_many_values_is_refused_before_they_are_read() -> None:
    with pytest.raises(StudySpaceError) as caught:
        parse_values(",".join(["1"] * 100_001), max_values=1000)
    assert "100,001 values, more than a study's 1,000 points" in str(caught.value)
    assert "COOPLAB_MAX_STUDY_POINTS" in str(caught.value)
    assert parse_values("1, 2", max_values=2) == [1, 2]
