"""Evaluation statistics computed by hand: standard errors, and pass@k for every k."""

from __future__ import annotations

import math

import pytest

from engine.trainer.evaluation import mean_and_se, pass_at_ks, summarize


def test_mean_and_standard_error_by_hand() -> None:
    # values 1, 2, 3, 6: mean 3; deviations -2, -1, 0, 3; squares 4+1+0+9 = 14; s^2 = 14/3; se = sqrt(14/3/4)
    mean, se = mean_and_se([1.0, 2.0, 3.0, 6.0])
    assert mean == 3.0
    assert se == pytest.approx(math.sqrt(14 / 12))
    assert mean_and_se([0.25]) == (0.25, 0.0)
    assert mean_and_se([1.0, 1.0, 1.0]) == (1.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        mean_and_se([])


def test_pass_at_every_k_by_hand() -> None:
    # n = 4 samples, c = 1 correct: pass@k = 1 - C(3, k) / C(4, k) = k / 4
    assert pass_at_ks(4, 1) == pytest.approx({1: 0.25, 2: 0.5, 3: 0.75, 4: 1.0})
    # n = 4, c = 2: pass@1 = 1/2; pass@2 = 1 - C(2,2)/C(4,2) = 1 - 1/6; pass@3 = pass@4 = 1 (only 2 wrong)
    assert pass_at_ks(4, 2) == pytest.approx({1: 0.5, 2: 5 / 6, 3: 1.0, 4: 1.0})
    assert pass_at_ks(3, 0) == {1: 0.0, 2: 0.0, 3: 0.0}
    assert pass_at_ks(1, 1) == {1: 1.0}


def test_summarize_averages_each_key_over_the_items_reporting_it() -> None:
    means, ses = summarize([{"a": 1.0, "b": 0.0}, {"a": 3.0}, {"a": 2.0, "b": 1.0}])
    assert means == {"a": 2.0, "b": 0.5}
    # a: 1, 3, 2 -> s^2 = (1 + 1 + 0) / 2 = 1, se = sqrt(1/3); b: 0, 1 -> s^2 = 0.5, se = sqrt(0.5/2) = 0.5
    assert ses["a"] == pytest.approx(math.sqrt(1 / 3)) and ses["b"] == pytest.approx(0.5)
