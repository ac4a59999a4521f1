"""The held-out learning bench, short: two tiny agents, a few steps, the whole pipeline (training with a
best checkpoint, evaluation of step 0, best and last on held-out items, the team analysis)."""

from __future__ import annotations

import pytest

from bench.training.heldout import main


@pytest.mark.slow
def test_the_heldout_bench_trains_evaluates_and_analyses(capsys) -> None:
    report = main(["--model", "builtin:tiny-llama", "--seeds", "0,1", "--steps", "4", "--lr", "1e-3",
                   "--samples", "2", "--new-tokens", "6", "--eval-interval", "2", "--eval-items", "6", "--json"])
    assert set(report["seeds"]) == {"0", "1"}
    for seed in report["seeds"].values():
        rows = seed["rows"]
        assert seed["status"] == "completed" and rows["step 0"]["step"] == 0 and rows["last"]["step"] == 4
        assert rows["best"]["step"] in (0, 2, 4) and all(r["items"] == 6 for r in rows.values())
        labels = [v["label"] for v in seed["analysis"]["variants"]]
        assert labels == ["trained", "base", "first reset", "second reset", "roles swapped"]
        assert seed["analysis"]["variants"][0]["metrics"]["eval/reward_mean"] == pytest.approx(rows["last"]["value"])
    gains = report["summary"]["gains"]
    for key, seed in report["seeds"].items():
        expected = seed["rows"]["last"]["value"] - seed["rows"]["step 0"]["value"]
        assert gains[int(key)]["gain"] == pytest.approx(expected)
    assert capsys.readouterr().out.count("\n") == 1  # --json: one line
