"""``python -m bench.gpu`` (``scripts/gpu_bench.sh``): the GPU benchmark of record's script, run end to end
on the CPU with a tiny shape so it cannot rot; its JSON's fields and numbers; the CoMLRL side skipped
with the missing package's name; the shapes it builds have the real models' parameter counts."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch

from bench.gpu import comlrl_side
from bench.gpu.__main__ import main
from bench.gpu.workload import CPU_TINY

ROOT = Path(__file__).resolve().parents[2]
HAS_COMLRL = all(importlib.util.find_spec(name) is not None for name in comlrl_side.IMPORTED)


@pytest.fixture
def one_thread():
    """The CLI sets one torch thread on the CPU; put back what the test process had."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_the_record_runs_end_to_end_on_the_cpu(tmp_path: Path, one_thread: None, capsys) -> None:
    path = tmp_path / "record.json"
    assert main(["--device", "cpu", "--tiny", "--no-comlrl", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    assert result["schema"] == "cooplab.gpu_bench/1" and result["complete"] is True
    assert result["device"]["type"] == "cpu" and result["device"]["peak_bf16_flops"] is None
    assert set(result["formulas"]) >= {"update_mfu", "roofline_fraction", "rollout_vs_hf", "step_vs_comlrl"}
    assert list(result["shapes"]) == ["tiny"] and not result["skipped"] and not result["failed"]
    shape = result["shapes"]["tiny"]
    w = CPU_TINY
    team, decode = shape["cooplab"], shape["decode"]
    # EOS is unreachable: every step generated agents x prompts x K x new tokens, counted by the trainer too
    assert team["generated_tokens_per_step"] == 2 * 2 * 2 * 6
    assert team["generated_tokens_counted"] == [48] * (w.warmup_steps + w.steps)
    assert len(team["steps"]) == w.warmup_steps + w.steps
    assert 5.0 < team["mean_completion_words"] <= 6.0  # the reward saw full-length texts (a sampled <pad> drops a word)
    for key in ("step_s", "rollout_s", "update_s", "s_per_1k_tokens", "rollout_tokens_per_s", "update_tokens_per_s",
                "update_flops", "peak_mem_gib"):
        assert _positive(team[key]), (key, team[key])
    assert team["update_tokens"] == 2 * (2 * 8 + 2 * 2 * 6)  # each prompt once, every completion token
    assert team["rollout_s"] + team["update_s"] <= team["step_s"] * 1.05
    assert team["weight_refresh_s"] == 0.0 and team["update_mfu"] is None  # no sampling copy; no peak on a CPU
    assert team["logprob_pass"]["in_step_s"] == 0.0 and _positive(team["logprob_pass"]["standalone_s"])
    assert team["logprob_pass"]["tokens"] == 2 * 2 * 6
    # the same batch through the engine's sampler, generate and in float32
    assert decode["batch"] == 4 and decode["lean_tokens"] == decode["hf_tokens"] == 4 * 6
    # a decode step is (full call - one-token call) / 5 tokens: on this tiny model the two calls' difference
    # can fall under a loaded machine's noise and is then clamped to 0 (seen with four test processes)
    assert decode["lean_step_s"] is not None and decode["lean_step_s"] >= 0.0 and _positive(decode["rollout_vs_hf"])
    assert decode["roofline_fraction"] is None  # no HBM bandwidth for a CPU
    # both token loops on the batch: the static path (eager on a CPU) samples the lean loop's tokens
    assert decode["lean_path"] == "loop" and decode["static"]["used"] and decode["same_tokens_static_loop"]
    assert decode["static"]["tokens"] == decode["loop"]["tokens"] == 24 and decode["static"]["bucket"] == 4
    assert _positive(decode["static"]["step_s"]) and decode["static"]["graphs_captured_warmup"] == 0
    assert shape["ratios"]["static_vs_loop"] == pytest.approx(decode["loop"]["s"] / decode["static"]["s"])
    assert decode["float32"]["lean_tokens"] == 24 and _positive(decode["float32"]["bf16_copy_refresh_s"])
    assert _positive(decode["float32"]["bf16_copy_tokens_per_s"])
    probe = decode["attention_probe"]  # a CPU has only the default SDPA backend to time
    assert set(probe["bfloat16"]) == set(probe["float32"]) == {"default"}
    assert _positive(probe["bfloat16"]["default"]["second_pass_s"])
    ratios = shape["ratios"]
    assert ratios["rollout_vs_hf"] == pytest.approx(decode["hf_generate_s"] / decode["lean_s"])
    assert ratios["bf16_vs_fp32"] == pytest.approx(decode["float32"]["lean_s"] / decode["lean_s"])
    assert shape["comlrl"] == {"status": "skipped", "reason": "--no-comlrl"} and ratios["step_vs_comlrl"] is None
    assert {row["key"] for row in result["targets"]} == {"step_vs_comlrl", "rollout_vs_hf", "roofline_fraction",
                                                         "bf16_vs_fp32", "update_mfu"}
    out = capsys.readouterr().out
    assert "tiny: 0 M parameters" in out and "target rollout vs Hugging Face generate" in out


def test_the_comlrl_side_is_skipped_naming_the_missing_package(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(comlrl_side.importlib.util, "find_spec", lambda name: None if name == "wandb" else real(name))
    got = comlrl_side.run_comlrl_side("tiny", CPU_TINY, "cpu", timeout_s=60)  # nothing is started
    assert got["status"] == "skipped" and "wandb not installed" in got["reason"]
    assert "pip install --no-deps comlrl==1.4.3" in got["reason"] and "fetch_gpu_bench_wheels.sh" in got["reason"]


def test_the_real_shapes_have_the_qwen25_parameter_counts() -> None:
    from bench.gpu.record import shape_parameters

    assert shape_parameters("qwen2.5-0.5b") == 494_032_768  # built on the meta device: no memory, no weights
    assert shape_parameters("qwen2.5-1.5b") == 1_543_714_304
    assert shape_parameters("qwen2.5-3b") == 3_085_938_688


def test_no_cuda_device_is_said_and_exits_3(capsys) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the no-GPU path cannot be reached")
    assert main(["--device", "cuda"]) == 3
    assert "no CUDA device" in capsys.readouterr().out


def test_the_prepared_command_passes_its_arguments_to_the_benchmark(tmp_path: Path) -> None:
    env = dict(os.environ, PY=str(Path(os.sys.executable)))
    proc = subprocess.run(["bash", "scripts/gpu_bench.sh", str(tmp_path / "r.json"), "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "versions: torch" in proc.stdout and "--budget-s" in proc.stdout and "--tiny" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(not HAS_COMLRL, reason=f"CoMLRL 1.4.3's side needs {', '.join(comlrl_side.IMPORTED)} "
                                           f"(a benchmark-only extra), not all installed")
def test_the_comlrl_side_runs_the_same_script_in_a_subprocess(one_thread: None) -> None:
    torch.set_num_threads(1)
    got = comlrl_side.run_comlrl_side("tiny", CPU_TINY, "cpu", timeout_s=300)
    assert got["status"] == "ok", got.get("reason")
    assert len(got["step_s_all"]) == CPU_TINY.warmup_steps + CPU_TINY.comlrl_steps
    assert _positive(got["s_per_1k_tokens"]) and got["generated_tokens_per_step"] == 2 * 1 * 2 * 6
    assert 5.0 < got["mean_completion_words"] <= 6.0  # CoMLRL generated full-length completions too
