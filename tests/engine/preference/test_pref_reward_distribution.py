"""Team-reward distributions of the iterative preference trainers (CoMLRL's log_reward_distribution):
bins, histograms, summaries and metrics computed by hand, the JSON record, the SVG, the files."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest

from engine.preference.reward_distribution import (
    SERIES,
    bin_edges,
    distribution_metrics,
    distribution_range,
    distribution_record,
    histogram,
    render_svg,
    summary,
    write_distribution,
)

SVG = "{http://www.w3.org/2000/svg}"
NAN, INF = float("nan"), float("inf")


def test_series_names() -> None:
    assert SERIES == ("current", "comparator", "winner", "loser")


def test_bin_edges_by_hand() -> None:
    assert bin_edges(0.0, 1.0, 4) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert bin_edges(-1.0, 1.0, 2) == [-1.0, 0.0, 1.0]
    assert bin_edges(2.0, 2.0, 2) == [1.5, 2.0, 2.5]  # equal low and high: a unit-wide range around it
    assert bin_edges(0.0, 0.3, 3)[-1] == 0.3  # the last edge is exactly high
    with pytest.raises(ValueError, match="bins"):
        bin_edges(0.0, 1.0, 0)
    with pytest.raises(ValueError, match="range"):
        bin_edges(1.0, 0.0, 2)


def test_histogram_by_hand_last_bin_closed() -> None:
    assert histogram([0.0, 0.25, 0.5, 1.0], [0.0, 0.5, 1.0]) == [2, 2]
    # an inner edge belongs to the bin on its right; the top edge to the last bin
    assert histogram([0.25, 0.5, 0.75, 1.0], [0.0, 0.25, 0.5, 0.75, 1.0]) == [0, 1, 1, 2]
    assert histogram([], [0.0, 1.0]) == [0]


def test_histogram_clamps_and_skips_non_finite() -> None:
    assert histogram([-5.0, 0.1, 0.9, 7.0], [0.0, 0.5, 1.0]) == [2, 2]  # outside values in the end bins
    assert histogram([NAN, INF, -INF, 0.2], [0.0, 0.5, 1.0]) == [1, 0]
    with pytest.raises(ValueError, match="increasing"):
        histogram([0.0], [1.0, 0.0])


def test_distribution_range() -> None:
    assert distribution_range({"current": [0.5, NAN, 2.0], "loser": [-1.0, INF]}) == (-1.0, 2.0)
    assert distribution_range({"current": [], "winner": [NAN]}) == (0.0, 1.0)
    assert distribution_range({}) == (0.0, 1.0)


def test_summary_by_hand() -> None:
    stats = summary([1.0, 2.0, 3.0, 6.0, NAN])
    assert stats["count"] == 4.0
    assert stats["mean"] == pytest.approx(3.0)
    assert stats["std"] == pytest.approx(math.sqrt((4 + 1 + 0 + 9) / 4))  # population std
    assert (stats["min"], stats["max"], stats["median"]) == (1.0, 6.0, 2.5)
    assert summary([INF, NAN]) == {"count": 0.0}
    assert summary([4.0])["std"] == 0.0


def test_metrics_for_two_series() -> None:
    metrics = distribution_metrics({"current": [0.0, 1.0], "winner": [2.0], "loser": [NAN]})
    stats = ("mean", "std", "min", "max", "median", "count")
    assert set(metrics) == {f"reward_dist/{name}/{stat}" for name in ("current", "winner") for stat in stats}
    assert metrics["reward_dist/current/mean"] == 0.5
    assert metrics["reward_dist/current/std"] == 0.5
    assert metrics["reward_dist/current/median"] == 0.5
    assert metrics["reward_dist/current/count"] == 2.0
    assert metrics["reward_dist/winner/min"] == metrics["reward_dist/winner/max"] == 2.0
    assert metrics["reward_dist/winner/std"] == 0.0
    with pytest.raises(ValueError, match="target"):
        distribution_metrics({"target": [1.0]})  # an unknown series name is a wiring error


def test_record_round_trips_through_json() -> None:
    record = distribution_record(3, {"current": [0.0, 0.5, 1.0], "comparator": [1.0, NAN], "loser": []}, bins=2)
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert record["iteration"] == 3
    assert record["edges"] == [0.0, 0.5, 1.0]
    assert list(record["series"]) == ["current", "comparator", "loser"]
    current = record["series"]["current"]
    assert current["counts"] == [1, 2] and current["count"] == 3 and current["mean"] == 0.5
    assert record["series"]["comparator"]["counts"] == [0, 1]
    assert record["series"]["comparator"]["values"] == [1.0]
    assert record["series"]["loser"] == {"count": 0, "counts": [0, 0], "values": []}


def test_svg_parses_with_one_path_per_non_empty_series_and_a_legend() -> None:
    record = distribution_record(1, {"current": [0.0, 0.01, 1.0], "comparator": [0.4], "winner": [], "loser": [NAN]})
    root = ET.fromstring(render_svg(record, "iteration 1"))
    assert root.tag == f"{SVG}svg"
    paths = root.findall(f".//{SVG}path")
    assert [p.get("data-series") for p in paths] == ["current", "comparator"]
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend")
    assert [t.text for t in legend.iter(f"{SVG}text")] == ["current (n=3)", "comparator (n=1)"]
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "team reward" in texts and "candidates" in texts
    ticks = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "ticks")
    x_ticks = [t.text for t in ticks if t.get("text-anchor") == "middle"]
    y_ticks = [t.text for t in ticks if t.get("text-anchor") == "end"]
    assert x_ticks == ["0", "0.25", "0.5", "0.75", "1"]  # over [0, 1], compact
    assert y_ticks == ["0", "1", "2"]  # up to the largest count: 0 and 0.01 share the first of 20 bins


def test_svg_escapes_the_title() -> None:
    record = distribution_record(2, {"current": [1.0]})
    svg = render_svg(record, 'a <b> & "c"')
    assert "a &lt;b&gt; &amp;" in svg and "<b>" not in svg
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert 'a <b> & "c"' in texts
    # an equal low and high still gives a valid plot (edges 0.5 .. 1.5)
    assert "0.5" in texts and "1.5" in texts


def test_write_distribution_writes_both_files(tmp_path) -> None:
    folder = tmp_path / "reward_distribution" / "run"
    json_path, svg_path = write_distribution(folder, 7, {"current": [0.0, 1.0], "winner": [1.0]}, bins=4)
    assert (json_path, svg_path) == (folder / "iteration_007.json", folder / "iteration_007.svg")
    assert sorted(p.name for p in folder.iterdir()) == ["iteration_007.json", "iteration_007.svg"]  # no temp files
    record = json.loads(json_path.read_text(encoding="utf-8"))
    assert record["iteration"] == 7 and record["series"]["current"]["counts"] == [1, 0, 0, 1]
    root = ET.fromstring(svg_path.read_text(encoding="utf-8"))
    assert [p.get("data-series") for p in root.iter(f"{SVG}path")] == ["current", "winner"]
    write_distribution(folder, 7, {"current": [5.0]})  # rewriting replaces, still no temp files
    assert sorted(p.name for p in folder.iterdir()) == ["iteration_007.json", "iteration_007.svg"]
    assert json.loads(json_path.read_text(encoding="utf-8"))["series"]["current"]["values"] == [5.0]
