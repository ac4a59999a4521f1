"""The memory benchmark on tiny agents: each configuration's accounting, the table, bad input."""

from __future__ import annotations

import importlib.util

import pytest

from bench.training.memory import CONFIGS, MemoryWorkload, format_memory_report, main, run_memory_bench

TINY = MemoryWorkload(model="builtin:tiny-llama", steps=1, warmup_steps=0, num_generations=2, max_new_tokens=4)


@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed (the lora extra)")
def test_memory_configurations_account_shared_weights_once() -> None:
    result = run_memory_bench(TINY, ("full", "shared", "lora_shared"), isolate=False)
    r = result["configs"]
    assert all("error" not in r[name] for name in r), r
    full, shared, lora = r["full"], r["shared"], r["lora_shared"]
    assert shared["weights_mb"] == pytest.approx(full["weights_mb"] / 2)
    assert shared["unshared_weights_mb"] == pytest.approx(full["weights_mb"])
    assert shared["optimizer_mb"] == pytest.approx(full["optimizer_mb"])  # an AdamW state per agent
    assert shared["weights_mb"] < lora["weights_mb"] < 0.6 * full["weights_mb"]  # the base once + 2 adapters
    assert lora["optimizer_mb"] < 0.1 * full["optimizer_mb"] and lora["trainable_m"] < 0.1 * full["trainable_m"]
    for part in r.values():
        assert part["peak_mem_mb"] >= part["loaded_mem_mb"] > 0 and part["step_s_median"] > 0
    table = format_memory_report(result)
    assert table.count("\n| ") == 4 and "| lora_shared |" in table  # header + three rows


def test_unknown_configuration_is_refused_by_name(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--configs", "full,tiny"])
    assert "unknown configurations ['tiny']" in capsys.readouterr().err
    failed = run_memory_bench(TINY, ("nope",), isolate=False)["configs"]["nope"]
    assert "unknown memory configuration 'nope'" in failed["error"] and "nope" not in CONFIGS


def test_sampling_copies_are_reported_at_half_the_float32_weights() -> None:
    result = run_memory_bench(TINY, ("full", "rollout_bf16"), isolate=False)
    full, rollout = result["configs"]["full"], result["configs"]["rollout_bf16"]
    assert rollout["weights_mb"] == pytest.approx(full["weights_mb"])  # training weights stay float32
    assert full["rollout_copy_mb"] == 0 and rollout["rollout_copy_mb"] == pytest.approx(full["weights_mb"] / 2, rel=1e-3)  # buffers aside
    assert "sampling copies)" in format_memory_report(result).splitlines()[-1]
