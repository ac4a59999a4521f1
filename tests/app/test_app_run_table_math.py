"""The runs table's pure functions, checked by hand: config flattening, sort over every run, search
text and group aggregates (mean and sample standard deviation)."""

from __future__ import annotations

import math

import pytest

from app.run_table import Row, config_paths, flatten_config, group_aggregates, mean_std, sort_rows


def test_flatten_config_by_key_and_index() -> None:
    config = {"trainer": {"lr": 0.1, "betas": [0.9, 0.99]}, "agents": [{"model": "m"}], "empty": {}, "none": []}
    assert flatten_config(config) == {"trainer.lr": 0.1, "trainer.betas.0": 0.9, "trainer.betas.1": 0.99,
                                      "agents.0.model": "m", "empty": "{}", "none": "[]"}


def test_config_paths_mark_those_that_differ() -> None:
    paths, varying = config_paths([{"a": 1, "b": {"c": "x"}}, {"a": 2, "b": {"c": "x"}}, {"a": 1, "b": {"c": "x"},
                                                                                      "d": True}])
    assert paths == ["a", "b.c", "d"] and varying == {"a", "d"}  # d: one config lacks it


def test_mean_and_sample_std_by_hand() -> None:
    assert mean_std([]) == (None, None)
    assert mean_std([4.0]) == (4.0, None)
    mean, std = mean_std([2.0, 4.0, 9.0])  # mean 5; squares 9 + 1 + 16 = 26; 26 / (3 - 1) = 13
    assert mean == 5.0 and std == pytest.approx(math.sqrt(13))


def test_group_aggregates_by_hand() -> None:
    rows = [{"lr": 0.1, "r": 1.0, "s": 10}, {"lr": 0.1, "r": 3.0, "s": None}, {"lr": 0.01, "r": 2.0, "s": 4},
            {"lr": None, "r": None, "s": 1}]
    groups = group_aggregates(rows, "lr", ["r", "s"])
    assert [g["lr"] for g in groups] == ["0.01", "0.1", "(none)"]  # by value, the missing one last
    small, large, none = groups
    assert small == {"lr": "0.01", "runs": 1, "r mean": 2.0, "r std": None, "r n": 1, "s mean": 4.0, "s std": None,
                     "s n": 1}
    assert large["runs"] == 2 and large["r mean"] == 2.0 and large["r std"] == pytest.approx(math.sqrt(2))  # (1 + 1) / 1
    assert large["s mean"] == 10.0 and large["s n"] == 1  # a run without a value is left out of that column
    assert none["runs"] == 1 and none["r mean"] is None and none["r n"] == 0


def _row(run_id: int, value: object) -> Row:
    return Row(run_id, {"run": run_id, "x": value}, {}, "")


def test_sort_puts_numbers_in_order_ties_newest_first_and_missing_last() -> None:
    rows = [_row(1, 0.5), _row(2, None), _row(3, 2.0), _row(4, 0.5), _row(5, math.nan), _row(6, -1)]
    assert [r.run_id for r in sort_rows(rows, "x", descending=True)] == [3, 4, 1, 6, 5, 2]
    assert [r.run_id for r in sort_rows(rows, "x", descending=False)] == [6, 4, 1, 3, 5, 2]
    text = [_row(1, "b"), _row(2, "A"), _row(3, ""), _row(4, 3)]
    assert [r.run_id for r in sort_rows(text, "x", descending=False)] == [4, 2, 1, 3]  # numbers, then text


def test_default_columns_fit_beside_the_sidebar_at_1400_px() -> None:
    """At a 1400 px window the table's frame is 938 px wide beside the sidebar (measured in Chromium by
    tests/e2e/test_runs_table_e2e.py); the row boxes take about 32 px. The old columns took 1180 px."""
    from app.components.run_columns import column_config
    from app.run_table import Columns

    widths = [c["width"] for c in column_config(Columns()).values()]
    assert len(widths) == 9 and sum(widths) + 32 <= 938, sum(widths)
