"""The GPU readiness check: its clean exit without a CUDA device, and every check on a tiny model on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cooplab.gpu_check import EXIT_NO_GPU, main, run_checks

ROOT = Path(__file__).resolve().parents[2]
NO_CUDA = "a CUDA device is present here, so the no-GPU path cannot be exercised"


@pytest.mark.skipif(torch.cuda.is_available(), reason=NO_CUDA)
def test_the_script_says_there_is_no_gpu_and_exits_cleanly() -> None:
    proc = subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PY": sys.executable}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA device: torch.cuda.is_available() is False" in proc.stdout
    assert "Nothing was checked" in proc.stdout and "[PASS]" not in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason=NO_CUDA)
def test_require_gpu_turns_the_missing_gpu_into_an_exit_status(capsys) -> None:
    assert main(["--require-gpu"]) == EXIT_NO_GPU
    assert "no CUDA device" in capsys.readouterr().out


def test_every_check_passes_on_a_tiny_model_on_the_cpu() -> None:
    results = run_checks("cpu", "tiny", new_tokens=4)
    assert [r.name for r in results] == ["placement", "decode_float32", "decode_bfloat16", "bf16_training",
                                         "mp_same_device", "rollout_bfloat16"]
    failed = [(r.name, r.detail) for r in results if not r.ok]
    assert not failed
    decode = results[1]
    assert decode.numbers["logprob_max_diff"] <= 1e-3 and decode.numbers["sample_tokens_per_s"] > 0
    assert decode.numbers["sample_tokens_per_s_forward"] > 0
    assert decode.numbers["sample_tokens_per_s_loop"] > 0 and decode.numbers["first_call_s"] > 0
    assert "fast token step: exact on this device" in decode.detail  # the CPU needs no check
    assert "parallel_training=mp" in results[4].detail and "bfloat16" in results[3].detail
    assert "dtypes ['float32']" in results[5].detail  # trained in float32, sampled from bfloat16 copies
    assert "sampling copies in bfloat16 follow the weights: [True, True]" in results[5].detail


def test_a_check_that_raises_is_a_failure_naming_the_error() -> None:
    from cooplab.gpu_check import _measured

    def broken():
        raise RuntimeError("CUDA out of memory")

    result = _measured("cpu", "decode_float32", broken)
    assert not result.ok and result.name == "decode_float32"
    assert result.detail == "raised RuntimeError: CUDA out of memory" and result.numbers["seconds"] >= 0


def test_the_training_checks_train_a_model_whose_completions_all_decode_to_nothing(monkeypatch) -> None:
    """The 0.5B shape's 151,936-token vocabulary over the 495-token tiny tokenizer: almost every sampled
    id decodes to nothing, so two completions of an item are often both empty and a reward of the text
    alone ties. The check's reward breaks ties, so a team that can train always trains in the check."""
    from cooplab import gpu_check

    monkeypatch.setitem(gpu_check.SHAPES, "tiny-wide", {**gpu_check.SHAPES["tiny"], "vocab_size": 60_000})
    models = [gpu_check.build_model("tiny-wide", "cpu", torch.bfloat16, seed=s)[0] for s in (0, 1)]
    tokenizer = gpu_check.build_model("tiny", "cpu", torch.float32)[1]
    for mp in (False, True):
        check = gpu_check.check_training(models, tokenizer, "cpu", name="wide", new_tokens=4, mp=mp)
        assert check.ok, check.detail
        assert "agents trained: [True, True]" in check.detail
