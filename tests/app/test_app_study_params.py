"""A study's parameter importance (the fraction of the objective's variance each parameter explains,
η², by binning) and its parallel-coordinates axes, checked by hand."""

from __future__ import annotations

import math

import pytest

from app.study_params import axis, bins_of, param_importance, parcoords_axes, variance_explained


def test_variance_explained_by_hand() -> None:
    y = [1.0, 2.0, 3.0, 4.0]  # mean 2.5; total sum of squares 2.25 + 0.25 + 0.25 + 2.25 = 5
    # bins {1, 2} and {3, 4}: means 1.5 and 3.5, between = 2 * 1 + 2 * 1 = 4 -> 4 / 5
    assert variance_explained([0, 0, 1, 1], y) == pytest.approx(0.8)
    # bins {1, 3} and {2, 4}: means 2 and 3, between = 2 * 0.25 + 2 * 0.25 = 1 -> 1 / 5
    assert variance_explained([0, 1, 0, 1], y) == pytest.approx(0.2)
    assert variance_explained([0, 1, 0, 1], [2.0, 2.0, 2.0, 2.0]) is None  # nothing to explain
    assert variance_explained([0, 0, 0, 0], y) == 0.0


def test_bins_one_per_value_or_equal_count_by_rank() -> None:
    assert bins_of(["b", "a", "b"]) == [1, 0, 1]
    assert bins_of([0.1, 0.01, 0.1, 0.001]) == [2, 1, 2, 0]  # three distinct values: one bin each
    # eight values, six distinct (> 4): bin = first position in sorted order * 4 // 8, ties share a bin
    assert bins_of([1, 1, 1, 2, 3, 4, 5, 6]) == [0, 0, 0, 1, 2, 2, 3, 3]


def test_param_importance_ranks_by_eta_squared() -> None:
    trials = [({"lr": "x", "warmup": "p"}, 1.0), ({"lr": "x", "warmup": "q"}, 2.0),
              ({"lr": "y", "warmup": "p"}, 3.0), ({"lr": "y", "warmup": "q"}, 4.0), ({"lr": "y", "warmup": "q"}, None)]
    ranked = param_importance(trials, ["warmup", "lr"])
    assert [(i.param, i.bins, i.children) for i in ranked] == [("lr", 2, 4), ("warmup", 2, 4)]
    assert ranked[0].eta_squared == pytest.approx(0.8) and ranked[1].eta_squared == pytest.approx(0.2)


def test_binned_importance_by_hand() -> None:
    values = [1, 1, 1, 2, 3, 4, 5, 6]
    y = [1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # mean 23/8; total 215/8; bins [0,0,0,1,2,2,3,3] with means 1, 2, 3.5, 5.5: between 207/8
    [importance] = param_importance([({"p": v}, t) for v, t in zip(values, y, strict=True)], ["p"])
    assert importance.eta_squared == pytest.approx(207 / 215) and importance.bins == 4


def test_parcoords_axes_log_numbers_and_categories() -> None:
    assert axis("lr", [0.1, 0.001]) == {"label": "log10 lr", "values": [pytest.approx(-1), pytest.approx(-3)]}
    assert axis("warmup", [10, 20]) == {"label": "warmup", "values": [10.0, 20.0]}
    assert axis("mode", ["sum", "mean", "sum"]) == {"label": "mode", "values": [1, 0, 1], "tickvals": [0, 1],
                                                    "ticktext": ["mean", "sum"]}
    axes = parcoords_axes([({"lr": 0.1}, 0.5), ({"lr": 0.2}, math.nan), ({"lr": 0.3}, 0.7)], ["lr"], "reward")
    assert axes == [{"label": "lr", "values": [0.1, 0.3]}, {"label": "reward", "values": [0.5, 0.7]}]
