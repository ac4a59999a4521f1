"""The metrics CSV export: a metric key is user text (a reward term's name), so one that starts like a
spreadsheet formula is written as text; numbers stay numbers."""

from __future__ import annotations

import csv
import io

from db.ops_metrics import iter_csv
from db.records import MetricPoint


def test_a_metric_key_that_starts_like_a_formula_is_written_as_text():
    points = [MetricPoint(key, 3, 12, -0.5, 1.7e9) for key in
              ("=HYPERLINK(\"http://evil.test\",\"x\")", "@SUM(A1)", "+1", "-2+3", "\tcmd", "train/reward_mean")]
    rows = list(csv.reader(io.StringIO("".join(iter_csv(points)))))
    assert rows[0] == ["key", "step", "env_step", "value", "wall_time"]
    assert [r[0] for r in rows[1:]] == ["'=HYPERLINK(\"http://evil.test\",\"x\")", "'@SUM(A1)", "'+1", "'-2+3",
                                         "'\tcmd", "train/reward_mean"]
    assert all(r[1:] == ["3", "12", "-0.5", "1700000000.0"] for r in rows[1:])
