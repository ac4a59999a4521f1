"""The MADPO benchmark: the engine parts on a tiny workload, CoMLRL's MADPO on the same work, the CLI."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import typer
from typer.testing import CliRunner

from bench.training import Workload
from bench.training.madpo_compare import format_madpo_report, run_madpo_bench
from cooplab.cmd_bench import register

# 2 steps (1 warm-up): 2 items, 3 candidates each (3 ordered pairs with a positive gap), 2 pairs kept
TINY = Workload(size="xs", steps=1, warmup_steps=1, max_new_tokens=4, num_generations=3)
HAS_COMLRL = importlib.util.find_spec("comlrl") is not None


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps `bench` a named subcommand
    return app


def test_engine_madpo_parts_time_collection_and_dpo_steps() -> None:
    result = run_madpo_bench(TINY, isolate=False)
    assert result["workload"]["full_length"] is True  # equal completion lengths on every side
    for name in ("engine", "engine_batched"):
        part = result[name]
        assert part["items"] == TINY.total_steps
        assert 0 < part["pairs"] <= TINY.total_steps * TINY.items_per_update
        assert part["steps"] == -(-part["pairs"] // TINY.items_per_update) == len(part["step_cpu_s"])
        assert part["collect_cpu_s_per_item"] > 0 and part["step_cpu_s_median"] > 0
    assert "comlrl" not in result and "speedup_engine_step" not in result
    report = format_madpo_report(result)
    assert "MADPO workload" in report and "engine_batched" in report and "vs CoMLRL" not in report
    json.dumps(result)


@pytest.mark.skipif(not HAS_COMLRL, reason="the comlrl package (CoMLRL 1.4.3, a benchmark-only extra) is not installed")
def test_comlrl_madpo_runs_the_same_work() -> None:
    result = run_madpo_bench(TINY, vs_comlrl=True, isolate=False)
    theirs, ours = result["comlrl"], result["engine"]
    assert theirs["items"] == ours["items"] and theirs["steps"] == len(theirs["step_cpu_s"]) > 0
    assert theirs["pairs"] <= TINY.total_steps * TINY.items_per_update
    assert result["speedup_engine_step"] == pytest.approx(theirs["step_cpu_s_median"] / ours["step_cpu_s_median"])
    assert result["speedup_engine_collect"] == pytest.approx(
        theirs["collect_cpu_s_per_item"] / ours["collect_cpu_s_per_item"])
    assert "engine vs CoMLRL: DPO step" in format_madpo_report(result)


def test_cli_madpo_without_comlrl_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "comlrl", None)  # `import comlrl` now fails as if it were absent
    monkeypatch.setitem(sys.modules, "comlrl.trainers.reinforce", None)
    out = CliRunner().invoke(_app(), ["bench", "--algorithm", "madpo", "--vs-comlrl", "--steps", "1", "--size", "xs"])
    assert out.exit_code == 2
    assert "comlrl==1.4.3" in out.output


def test_cli_rejects_an_unknown_algorithm() -> None:
    out = CliRunner().invoke(_app(), ["bench", "--algorithm", "ppo"])
    assert out.exit_code != 0
    assert "unknown algorithm 'ppo'" in out.output


def test_learning_bench_reward_and_measurement() -> None:
    from bench.training import madpo_learning as ml

    assert ml.team_reward(["a1b2", "xyz"], ["ABcd", ""]) == [0.5 * 0.5 + 0.5 * 0.5, 0.0]  # hand-computed
    models, tokenizer = ml.tiny_agents(0)
    m = ml.measure(models, tokenizer, samples=2)
    assert m.samples == 2 * len(ml.PROMPTS) and all(0.0 <= s <= 1.0 for s in m.shares)
    assert m.team == pytest.approx(0.5 * m.shares[0] + 0.5 * m.shares[1])  # the reward is linear in the shares
    assert ml.measure(models, tokenizer, samples=2) == m  # seeded: the same answers again



def test_mixed_learning_workload_reward_and_table() -> None:
    """Issue 39's workload: the reward reads the stripped text, answers are measured 4 per prompt, the
    run seed is the script's; the per-seed table compares the two sides seed by seed."""
    from bench.training import madpo_learning as ml
    from bench.training import madpo_mixed as mixed

    assert mixed.team_reward([" 12ab \n", "  "], ["AB c", "X"]) == [0.5 * 0.5 + 0.5 * 0.5, 0.5 * 1.0]  # hand-computed
    w = ml.workload_named("mixed")
    assert (w.samples, w.run_seed, w.formatters(), w.settings["preference_num_candidates"]) == (4, "script", None, 8)
    with pytest.raises(ValueError, match="unknown workload 'other'; expected one of issue25, mixed"):
        ml.workload_named("other")
    before = ml.Measurement(0.1, [0.0, 0.2], 32)
    rows = ml.comparison_table([ml.Result("comlrl", 0, before, ml.Measurement(0.2, [0.0, 0.4], 32), 4.0)],
                               [ml.Result("cooplab", 0, before, ml.Measurement(0.3, [0.0, 0.6], 32), 2.0)])
    assert "| 0 | +0.100 | +0.200 | yes | 2.00x (4.0 / 2.0) |" in rows.splitlines()
