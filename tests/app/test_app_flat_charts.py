"""Charts: a constant series is a flat line on a labelled y axis (smoothing adds no rounding spikes),
and the chart picker is never left empty by metrics arriving."""

from __future__ import annotations

from db.records import Series
from db.store import Store


def test_smoothing_a_constant_gives_the_constant() -> None:
    from app.smoothing import smooth

    assert smooth([1.0] * 20, "ema", 0.6) == [1.0] * 20  # not 1.0000000000000002 here and there
    assert smooth([0.1] * 7, "ema", 0.9) == [0.1] * 7
    assert smooth([0.0, 1.0], "ema", 0.5) == [0.0, 2 / 3]  # (0.5·0 + 0.5·1) / (1 − 0.25)


def test_a_flat_series_gets_a_y_range_around_its_value() -> None:
    from app.components.charts import line_figure

    flat = Series(run_id=1, key="train/epoch", x="step", xs=tuple(range(1, 21)), ys=(1.0,) * 20, total_points=20,
                  downsampled=False)
    figure = line_figure([("train/epoch", flat)], title="train/epoch").to_dict()
    assert figure["layout"]["yaxis"]["range"] == [0.95, 1.05]
    zero = Series(run_id=1, key="x", x="step", xs=(1, 2, 3), ys=(0.0, 0.0, 0.0), total_points=3, downsampled=False)
    assert line_figure([("x", zero)]).to_dict()["layout"]["yaxis"]["range"] == [-0.05, 0.05]
    moving = Series(run_id=1, key="y", x="step", xs=(1, 2), ys=(0.0, 1.0), total_points=2, downsampled=False)
    assert "range" not in line_figure([("y", moving)]).to_dict()["layout"].get("yaxis", {})  # Plotly's own


def test_run_detail_draws_a_constant_metric_flat(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="succeeded", steps=20, reward=lambda step: 1.0)
    at = app("run_detail", run=run_id)
    assert not at.exception
    [reward] = [f for f in figures(at) if "reward_mean per turn" in f["layout"]["title"]["text"]]
    assert reward["layout"]["yaxis"]["range"] == [0.95, 1.05]
    assert {y for trace in reward["data"] for y in trace["y"]} == {1.0}
