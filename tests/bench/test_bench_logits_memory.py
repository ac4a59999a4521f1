"""The logits-memory benchmark on a tiny workload, in this process: both variants run, the after
variant takes the chunked path, the table and the ratio, and bad input named."""

from __future__ import annotations

import pytest

from bench.training.logits_memory import LogitsWorkload, format_logits_report, main, run_logits_bench

# 2 x 8 positions x 32,768 tokens of float32 logits = 2 MiB, over the after variant's 1 MiB budget
TINY = LogitsWorkload(vocab=32_768, hidden=16, layers=1, batch=2, completion=8, prompt=4, budget_mib=1, threads=1)


def test_both_variants_run_and_only_after_chunks() -> None:
    result = run_logits_bench(TINY, isolate=False)
    before, after = result["variants"]["before"], result["variants"]["after"]
    assert (before["chunked"], after["chunked"]) == (False, True)
    assert (before["logits_chunk_mib"], after["logits_chunk_mib"]) == (0, 1)
    assert before["meter"] == after["meter"] == "cpu_rss"
    assert before["peak_mib"] > 0 and after["step_s"] > 0
    assert result["logits_mib"] == pytest.approx(2.0)
    table = format_logits_report(result)
    assert "| before | 0 | full logits |" in table and "| after | 1 | chunked |" in table
    assert (result["ratio"] is None) == (after["step_peak_mib"] <= 0)


def test_bad_sizes_and_variants_are_refused_by_name(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--variants", "before,fused"])
    assert "unknown variants ['fused']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--batch", "0"])
    assert "batch must be >= 1, got 0" in capsys.readouterr().err
    failed = run_logits_bench(TINY, ("nope",), isolate=False)["variants"]["nope"]
    assert "unknown variant 'nope'" in failed["error"]
