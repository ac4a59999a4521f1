"""Stored text in Plotly figures: Plotly draws a subset of HTML in every text it shows (titles, legend
entries, annotations, hover labels, category tick labels), ``<a href>`` among them. Each figure the
dashboard builds from stored names and values is checked here, whole: no string anywhere in it may
hold a ``<`` (every one goes through :func:`app.escape.plotly_text`)."""

from __future__ import annotations

from typing import Any

from app.components.charts import band_figure, line_figure, mark_attempts
from app.components.credit_chart import bar_figure
from app.components.study_results import scatter_figure
from app.escape import plotly_text
from app.seedgroups import Band
from db.records import Series
from jobs.study_results import PointResult
from jobs.study_rules import Spread

TAG_LINK = '<a href="http://evil.test/t">Session expired</a>'
KEY = "train/<b>reward</b>"


def strings(value: Any) -> list[str]:
    """Every string anywhere in a figure's JSON (data and layout)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def assert_no_markup(figure: Any) -> None:
    found = [s for s in strings(figure.to_plotly_json()) if "<" in s]
    assert not found, f"markup Plotly would render: {found}"


def _point(point: int, value: Any) -> PointResult:
    return PointResult(point=point, params={"task.params.style": value, TAG_LINK: 1}, statuses={"succeeded": 2},
                       run_ids=(point,), final={KEY: Spread(0.5 + point, 0.1, 2)})


def test_study_parameter_values_on_the_setting_result_chart_are_text() -> None:
    results = [_point(0, TAG_LINK), _point(1, "plain"), _point(2, ["<b>", 1]), _point(3, {"k": "<i>x</i>"})]
    figure = scatter_figure(results, "task.params.style", KEY)
    assert_no_markup(figure)
    xs = list(figure.data[0].x)
    assert xs[:2] == [plotly_text(TAG_LINK), "plain"]  # shown as the characters it holds
    assert_no_markup(scatter_figure(results, TAG_LINK, KEY))  # a searched path named like a tag


def test_numeric_settings_stay_numbers_on_a_log_axis() -> None:
    results = [_point(0, 0.001), _point(1, 0.01)]
    figure = scatter_figure(results, "task.params.style", KEY)
    assert list(figure.data[0].x) == [0.001, 0.01] and figure.layout.xaxis.type == "log"


def test_curve_band_and_bar_charts_show_names_as_text() -> None:
    series = Series(run_id=1, key=KEY, x="step", xs=(1.0, 2.0), ys=(0.1, 0.2), total_points=2, downsampled=False)
    lines = line_figure([(TAG_LINK, series)], title=KEY, boundaries=[(1.0, TAG_LINK)])
    assert_no_markup(lines)
    band = Band(xs=(1.0, 2.0), mean=(0.1, 0.2), lower=(0.0, 0.1), upper=(0.2, 0.3), runs=2)
    assert_no_markup(band_figure([(TAG_LINK, band)], title=KEY))
    assert_no_markup(bar_figure([(TAG_LINK, 0.3)], title=KEY))
    marked = line_figure([("x", series)])
    mark_attempts(marked, [(2.0, TAG_LINK)], "step")
    assert_no_markup(marked)
