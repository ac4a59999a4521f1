"""``python -m bench.training.script_ratio``: the user script in pinned processes, the medians and
ratios, the table, and CoMLRL reported as missing (with its install command) when it is absent."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.training.script_ratio import (
    comlrl_missing,
    format_markdown,
    load_result,
    run_script_ratio,
    summarize,
)
from bench.training.vs_comlrl import COMLRL_INSTALL


def _run(part: str, cores: int, train_s: float, setup_s: float = 0.0, tokens: int = 384) -> dict:
    return {"part": part, "cores": cores, "train_s": train_s, "train_cpu_s": train_s,
            "s_per_1k_tokens": 1000 * train_s / tokens, "s_per_1k_with_setup": 1000 * (setup_s + train_s) / tokens}


def test_summary_takes_medians_per_part_and_divides_comlrl_by_cooplab() -> None:
    runs = [_run("cooplab", 1, t, 2.4) for t in (9.6, 7.68, 11.52)] + [_run("comlrl", 1, t) for t in (19.2, 23.04, 15.36)]
    runs += [_run("cooplab_auto", 1, t) for t in (15.36, 13.44)]
    s = summarize(runs)[1]
    # medians: CoopLab 9.6 s -> 25 s per 1k; CoMLRL 19.2 s -> 50 s per 1k; fp32 (two runs) 14.4 s -> 37.5 s per 1k
    assert s["cooplab"]["train_s"] == pytest.approx(9.6) and s["cooplab"]["s_per_1k_tokens"] == pytest.approx(25.0)
    assert s["comlrl"]["s_per_1k_tokens"] == pytest.approx(50.0) and s["comlrl"]["runs"] == 3
    assert s["cooplab_auto"]["s_per_1k_tokens"] == pytest.approx(37.5)
    assert s["ratio_cooplab"] == pytest.approx(2.0) and s["ratio_cooplab_auto"] == pytest.approx(50 / 37.5)
    assert s["ratio_with_setup_cooplab"] == pytest.approx(19.2 / 12.0)  # the constructor's 2.4 s added
    assert "ratio_cooplab" not in summarize([r for r in runs if r["part"] != "comlrl"])[1]
    # on 2 cores CoMLRL's threads spun (76.8 s -> 200 s per 1k): its one-core 50 s per 1k is the fairer bar
    two = summarize(runs + [_run("cooplab", 2, 4.8), _run("comlrl", 2, 76.8)])[2]
    assert two["ratio_cooplab"] == pytest.approx(200 / 12.5) and two["ratio_best_cooplab"] == pytest.approx(50 / 12.5)


def test_token_count_counts_each_distinct_completion_once() -> None:
    from bench.training.script_ratio_user import TokenCount
    from engine.models.tiny import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    count = TokenCount([tok, tok])
    # length ratios 3/10 and 5/5, each 1.7 and 1.0 below the 2-3x band: exp(-1.7), exp(-1)
    assert count.reward(["Count to 3", "hello"], ["a b", "river"]) == pytest.approx([math.exp(-1.7), math.exp(-1.0)])
    count.reward(["", "hello"], ["a b", "river"])  # a credit call: agent 1's reply left empty, the rest again
    n = sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in ("Count to 3", "hello", "a b", "river"))
    assert (count.calls, count.completions, count.tokens) == (2, 4, n)


def test_missing_comlrl_is_named_with_its_install_command(tmp_path: Path) -> None:
    line = comlrl_missing(str(tmp_path))
    assert line is not None and f"not in {tmp_path}" in line
    assert COMLRL_INSTALL in line and "pip install --target DIR --no-deps comlrl==1.4.3" in line


@pytest.mark.slow
def test_the_runner_times_the_user_script_in_pinned_processes(tmp_path: Path) -> None:
    from engine.models.tiny import build_tiny_model

    model, tokenizer = build_tiny_model("llama", "xs")
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    result = run_script_ratio(str(folder), cores=[1], runs=1, comlrl_site=str(tmp_path / "no-comlrl"),
                              num_generations=2, max_new_tokens=4)
    runs = {r["part"]: r for r in result["runs"]}
    assert set(runs) == {"cooplab", "cooplab_auto"} and "not in" in result["comlrl_missing"]
    for r in runs.values():
        assert r["train_s"] > 0 and r["train_cpu_s"] > 0 and r["setup_s"] > 0
        assert r["tokens_generated"] == 2 * 2 * 4 and r["s_per_1k_tokens"] == pytest.approx(1000 * r["train_s"] / 16)
        assert 1 <= r["completions"] <= 4 and r["reward_calls"] >= 2 and r["peak_mem_mb"] > 0
        assert r["torch_threads"] == 1 and len(r["cpu_affinity"]) == 1
    assert len(runs["cooplab"]["sampling"]) == 2  # CoopLab says how each agent samples
    assert all("rollout_dtype is empty" in line for line in runs["cooplab"]["sampling"])  # float32 by default
    assert all("bfloat16" in line for line in runs["cooplab_auto"]["sampling"])  # a copy, or why not
    s = result["summary"][1]
    assert s["cooplab"]["train_s"] == runs["cooplab"]["train_s"] and "ratio_cooplab" not in s
    table = format_markdown(result)
    assert "| 1 | CoopLab (defaults) | 1 |" in table and "| 1 | CoopLab, rollout_dtype: auto | **median** |" in table
    missing = "- (CoMLRL missing)"
    assert f"| 1 | {missing} | {missing} | {missing}, {missing} | {missing}, {missing} |" in table and COMLRL_INSTALL in table
    assert "EOS unreachable for both" in table and "CoopLab's start-up lines" in table
    saved = tmp_path / "result.json"
    saved.write_text(json.dumps(result))
    assert format_markdown(load_result(saved)) == table  # --from-json prints the same table
