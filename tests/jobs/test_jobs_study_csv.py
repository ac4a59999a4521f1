"""The study results CSV opened in a spreadsheet: a text cell that starts like a formula (``=``, ``+``,
``-``, ``@``, a tab or a carriage return, as OWASP lists them) is written with a leading ``'`` so the
spreadsheet shows it as text; numbers stay numbers (a negative mean is not a formula)."""

from __future__ import annotations

import csv
import io

import pytest

from jobs import study_results
from jobs.study_results import PointResult, results_csv
from jobs.study_rules import Spread

FORMULAS = ["=HYPERLINK(\"http://evil.test\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)",
            "\t=1+1", "\r=1+1"]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_text_cell_that_starts_like_a_formula_gets_a_leading_quote(text: str) -> None:
    assert study_results.spreadsheet_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["writer", "0.01", "a=b", "", " =1"])
def test_other_text_is_kept(value: str) -> None:
    assert study_results.spreadsheet_cell(value) == value


def test_numbers_stay_numbers() -> None:
    assert study_results.spreadsheet_cell(-0.5) == -0.5 and study_results.spreadsheet_cell(3) == 3 and study_results.spreadsheet_cell(None) is None
    assert study_results.spreadsheet_cell(True) is True


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_the_results_csv_neutralises_formulas_in_values_and_headers() -> None:
    key = "=cmd|' /C calc'!A0"
    results = [PointResult(point=i, params={"task.params.style": text, "@path": -1}, statuses={"succeeded": 1},
                           run_ids=(i,), final={key: Spread(-0.25, 0.0, 1)}, best={key: Spread(-0.1, 0.0, 1)})
               for i, text in enumerate(FORMULAS)]
    header, *rows = _rows(results_csv(results, [key]))
    assert header[:3] == ["point", "task.params.style", "'@path"]
    assert f"'{key} final mean" in header and not [h for h in header if h[:1] in "=+-@\t\r"]
    assert [row[1] for row in rows] == ["'" + text for text in FORMULAS]
    assert {row[2] for row in rows} == {"-1"}  # a number, not text that looks like one
    assert {row[header.index(f"'{key} final mean")] for row in rows} == {"-0.25"}
