"""The storage benchmark runs end to end (tiny sizes) and reports sane numbers."""

from __future__ import annotations

import pytest

from bench.storage import main


def test_bench_runs_on_sqlite(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COOPLAB_TEST_POSTGRES_URL", raising=False)
    [result] = main(["--points", "3000", "--steps", "5", "--keys", "4"])
    assert result.backend == "sqlite" and result.points == 3000
    assert result.step_points_per_s > 0 and result.bulk_points_per_s > 0
    assert 0 < result.returned_points <= 1000 and result.series_query_s > 0
    out = capsys.readouterr().out
    assert "points/s" in out and "series over 3,000 points" in out
