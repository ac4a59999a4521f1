"""The LoRA-vs-full learning comparison: both arms train the same config, only the LoRA arm has adapters."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from bench.training.lora_learning import QUICKSTART, arm_config, compare, format_learning_report

pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed")


def test_arms_differ_only_in_the_adapters() -> None:
    base = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    full = arm_config(base, lora=False, seed=3, steps=5, rank=4, targets=["q_proj"], lora_lr=0.01)
    lora = arm_config(base, lora=True, seed=3, steps=5, rank=4, targets=["q_proj"], lora_lr=0.01)
    assert full["trainer"] == lora["trainer"] and full["trainer"]["seed"] == 3 and full["trainer"]["max_steps"] == 5
    assert all("lora_rank" not in a for a in full["agents"]) and "lora_rank" not in base["agents"][0]
    assert all(a["lora_rank"] == 4 and a["lora_alpha"] == 8.0 and a["learning_rate"] == 0.01 for a in lora["agents"])


def test_one_seed_two_steps_reports_both_arms() -> None:
    base = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    base["trainer"].update(num_generations=2, max_new_tokens=4)
    result = compare(base, [0], steps=2, window=1, rank=2, targets=["q_proj", "v_proj"], lora_lr=0.01)
    for arm in ("full", "lora"):
        assert len(result[arm]["rewards"][0]) == 2 and result[arm]["s_per_step"] > 0
        assert result[arm]["gain"] == pytest.approx(result[arm]["last"] - result[arm]["first"])
    assert result["full"]["first"] == result["lora"]["first"]  # step 1 samples the same untouched models
    assert "lora  " in format_learning_report(result)


def test_the_bfloat16_sampling_arm_differs_only_in_rollout_dtype() -> None:
    base = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    full = arm_config(base, lora=False, seed=1, steps=3, rank=4, targets=["q_proj"], lora_lr=0.01)
    bf16 = arm_config(base, lora=False, seed=1, steps=3, rank=4, targets=["q_proj"], lora_lr=0.01,
                      rollout_dtype="bfloat16")
    assert bf16["trainer"].pop("rollout_dtype") == "bfloat16" and bf16 == full
    base["trainer"].update(num_generations=2, max_new_tokens=4)
    result = compare(base, [0], steps=2, window=1, rank=2, targets=["q_proj"], lora_lr=0.01,
                     arms=("full", "rollout_bf16"))
    assert result["arms"] == ["full", "rollout_bf16"] and "lora" not in result
    assert len(result["rollout_bf16"]["rewards"][0]) == 2
    assert "rollout_bf16" in format_learning_report(result)
    with pytest.raises(ValueError, match="unknown arms"):
        compare(base, [0], steps=1, window=1, rank=2, targets=["q_proj"], lora_lr=0.01, arms=("fp8",))
