"""The benchmark: reward, a one-step smoke run of every part, CoMLRL handling and the CLI command.

The one-step smoke bench runs once per module (:func:`two_core_bench`), on two cores: its one-core parts
(engine, batched engine, bare, decoders) are the ones a one-core bench runs, with the same workloads, so
one run serves the checks of both (a second one-core bench, imports warm, cost about 2 s of CPU time)."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import sys

import pytest
import typer
from typer.testing import CliRunner

from bench.training import (
    ComlrlMissingError,
    Workload,
    format_report,
    import_comlrl,
    length_ratio_reward,
    run_bench,
    run_comlrl,
    run_part,
)
from cooplab.cmd_bench import register

SMOKE = Workload(size="xs", steps=1, warmup_steps=0, max_new_tokens=8, num_generations=2)
HAS_COMLRL = importlib.util.find_spec("comlrl") is not None


def test_length_ratio_reward() -> None:
    rewards = length_ratio_reward(["ab", "abcd", "ab", ""], ["abcde", "abcd", "abcdefgh", "xy"])
    # ratios 2.5 (inside), 1.0 (1 below 2), 4.0 (1 above 3), 2/1=2.0 (empty first reply counts as length 1)
    assert rewards == [1.0, pytest.approx(math.exp(-1)), pytest.approx(math.exp(-1)), 1.0]


@pytest.fixture(scope="module")
def two_core_bench() -> dict:
    import torch

    before = torch.get_num_threads()
    try:
        return run_bench(SMOKE, isolate=False, cores=2)
    finally:
        torch.set_num_threads(before)


def test_one_step_bench_reports_every_part(two_core_bench: dict) -> None:
    result = copy.deepcopy(two_core_bench)
    for name in ("engine", "engine_batched", "bare"):
        part = result[name]
        assert part["step_s_mean"] > 0 and part["step_s_median"] > 0
        assert part["peak_mem_mb"] > 50
    assert set(result["engine"]["phases"]) == {"generate_s", "reward_s", "update_s", "step_time_s"}
    assert result["engine"]["tokens_per_s"] > 0
    assert result["bare"]["phases"]["generate_s"] > 0
    assert result["overhead_engine"] == pytest.approx(
        result["engine"]["step_cpu_s_median"] / result["bare"]["step_cpu_s_median"]
    )
    assert len(result["engine"]["step_cpu_s"]) == SMOKE.total_steps
    assert all(t > 0 for t in result["engine"]["step_cpu_s"])
    assert result["decoders"]["one_prompt"]["prompts"] == 1
    assert result["decoders"]["step_prompts"]["prompts"] == SMOKE.items_per_update
    assert all(
        d["lean_cpu_s"] > 0 and d["lean_modules_cpu_s"] > 0 and d["generate_cpu_s"] > 0
        for d in result["decoders"].values()
    )
    report = format_report(result)
    assert "engine_batched" in report and "overhead" in report and "tiny-llama-xs" in report
    assert "lean decoder" in report and "through the model's forward" in report
    assert "fast token step off" not in report
    result["workload"]["fast_decode"] = False
    assert "fast token step off" in format_report(result)
    json.dumps(result)  # the --json output is plain JSON


@pytest.mark.slow
def test_a_part_runs_in_its_own_process() -> None:
    result = run_part("bare", SMOKE, isolate=True)
    assert result["step_s_mean"] > 0 and result["peak_mem_mb"] > 50


def test_unknown_part_is_named() -> None:
    with pytest.raises(ValueError, match="unknown bench part 'gpu'"):
        run_part("gpu", SMOKE)


def test_missing_comlrl_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "comlrl", None)  # `import comlrl` now fails as if it were absent
    monkeypatch.setitem(sys.modules, "comlrl.trainers.reinforce", None)
    with pytest.raises(ComlrlMissingError, match=r"pip install --no-deps comlrl==1\.4\.3"):
        import_comlrl()
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps `bench` a named subcommand
    out = CliRunner().invoke(app, ["bench", "--vs-comlrl", "--steps", "1", "--size", "xs"])
    assert out.exit_code == 2
    assert "comlrl==1.4.3" in out.output


def test_cli_rejects_an_unknown_size() -> None:
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    out = CliRunner().invoke(app, ["bench", "--size", "xl"])
    assert out.exit_code != 0
    assert "unknown size 'xl'" in out.output


@pytest.mark.skipif(not HAS_COMLRL, reason="CoMLRL is an optional benchmark extra")
def test_comlrl_runs_the_same_workload() -> None:
    result = run_comlrl(SMOKE)
    assert result["step_s_mean"] > 0


def test_two_core_parts_compare_by_wall_clock(two_core_bench: dict) -> None:
    result = two_core_bench
    assert result["cores"] == 2
    assert result["engine_mp"]["parallel_training"] == "mp" and result["engine_mp"]["agents_in_threads"]
    assert result["engine_mp_batched"]["parallel_training"] == "mp"
    # the one-core part keeps the default ("auto"), which on one thread runs the agents in turn
    assert result["engine"]["parallel_training"] == "auto" and not result["engine"]["agents_in_threads"]
    assert result["parallel_gain_wall"] == pytest.approx(
        result["engine"]["step_s_median"] / result["engine_mp"]["step_s_median"])
    assert "on 2 cores (wall clock): engine_mp" in format_report(result)
    assert "comlrl_cores" not in result  # CoMLRL parts only with vs_comlrl
