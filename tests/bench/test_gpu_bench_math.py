"""The GPU benchmark of record's arithmetic, checked against numbers worked out by hand: device peaks,
update tokens, FLOPs and MFU, the decode roofline, the memory estimate, the CoMLRL child's events, the
targets and which carried wheels are installed."""

from __future__ import annotations

import json

import pytest

from bench.gpu.comlrl_side import summarize_comlrl
from bench.gpu.report import evaluate_targets
from bench.gpu.roofline import (
    decode_floor_s,
    device_peak,
    mfu,
    per_decode_step_s,
    roofline_fraction,
    shape_seconds_estimate,
    train_memory_bytes,
    update_flops,
    update_tokens,
)
from bench.gpu.wheels import select_wheels, wheel_name_version
from bench.gpu.workload import GpuWorkload


def test_device_peaks_come_from_the_table_by_name() -> None:
    h100 = device_peak("NVIDIA H100 80GB HBM3")  # the SXM card's name as torch reports it
    assert (h100.bf16_flops, h100.hbm_bytes_per_s) == (989e12, 3.35e12)
    assert (device_peak("NVIDIA H200").bf16_flops, device_peak("NVIDIA H200").hbm_bytes_per_s) == (989e12, 4.8e12)
    assert device_peak("NVIDIA GH200 480GB").label == "NVIDIA GH200"  # not the H200 row, though "gh200" holds "h200"
    assert device_peak("NVIDIA H100 PCIe").bf16_flops == 756e12
    assert device_peak("AMD EPYC 7B13") is None and device_peak(None) is None


def test_update_tokens_flops_and_mfu_by_hand() -> None:
    # two agents, 16 prompts of 128 tokens (each once), 16 x 8 completions of 256 tokens: 2 x (2,048 + 32,768)
    assert update_tokens(16, 128, 8, 256, agents=2) == 69_632
    # 6 x 1e9 parameters x 69,632 tokens = 4.17792e14 FLOPs; in 1 s on an H100 (989e12 FLOP/s): 0.42244
    flops = update_flops(1_000_000_000, 69_632)
    assert flops == 4.17792e14
    assert mfu(flops, 1.0, 989e12) == pytest.approx(0.422439, rel=1e-5)
    assert mfu(flops, 2.0, 989e12) == pytest.approx(0.211219, rel=1e-5)
    assert mfu(flops, 1.0, None) is None and mfu(flops, 0.0, 989e12) is None  # a CPU, or no time measured


def test_decode_roofline_by_hand() -> None:
    # 3.35 GB of weights on an H100 (3.35 TB/s): at best 1 ms per decode step; measured 4 ms -> 25%
    assert decode_floor_s(3_350_000_000, 3.35e12) == pytest.approx(1e-3)
    assert roofline_fraction(3_350_000_000, 3.35e12, 4e-3) == pytest.approx(0.25)
    # Qwen2.5-0.5B in bfloat16: 494,032,768 x 2 = 988,065,536 bytes -> 0.29494 ms on an H100;
    # 10% of the roofline is a decode step of 2.9494 ms
    assert decode_floor_s(988_065_536, 3.35e12) == pytest.approx(2.94945e-4, rel=1e-5)
    assert roofline_fraction(988_065_536, 3.35e12, 2.94945e-3) == pytest.approx(0.1, rel=1e-5)
    assert roofline_fraction(988_065_536, None, 1e-3) is None and roofline_fraction(988_065_536, 3.35e12, None) is None
    # a 256-token call of 5.2 s and a 1-token call of 0.1 s: 255 decode steps in 5.1 s -> 20 ms each
    assert per_decode_step_s(5.2, 0.1, 256) == pytest.approx(0.02)
    assert per_decode_step_s(5.2, 0.1, 1) is None


def test_memory_estimate_by_hand() -> None:
    # 1e9 parameters, 2 agents, bf16: 2 x 4 copies x 2 bytes x 1e9 = 16e9; one micro-batch of 2 rows x 10
    # tokens x hidden 100 x 3 layers x 34 bytes = 204,000; logits 2 rows x 5 tokens x 1,000 x 10 bytes = 100,000
    got = train_memory_bytes(1_000_000_000, 2, param_bytes=2, micro_rows=2, seq_tokens=10, hidden=100, layers=3,
                             vocab=1000, new_tokens=5)
    assert got == 16_000_000_000 + 204_000 + 100_000


def test_a_shapes_time_is_estimated_from_the_last_by_layers_and_parameters() -> None:
    # the last shape: 100 s, 20 of them updates; the next has 3x the parameters and 1.5x the layers:
    # 80 s x 1.5 (decoding, per-layer launches) + 20 s x 3 (the update's arithmetic) = 180 s
    assert shape_seconds_estimate(100.0, 20.0, params_ratio=3.0, layers_ratio=1.5) == pytest.approx(180.0)
    assert shape_seconds_estimate(10.0, 50.0, params_ratio=2.0, layers_ratio=1.0) == pytest.approx(20.0)  # capped


def test_the_comlrl_childs_events_become_per_step_seconds() -> None:
    w = GpuWorkload(comlrl_items=2, comlrl_steps=2)
    lines = [json.dumps({"event": "ready", "t": 10.0}), "some log line", json.dumps({"event": "step", "t": 40.0}),
             json.dumps({"event": "step", "t": 60.0}), json.dumps({"event": "step", "t": 82.0}),
             json.dumps({"event": "done", "t": 82.5, "peak_mem_gib": 9.5})]
    got = summarize_comlrl("\n".join(lines), "", 0, w)
    # steps 30, 20, 22 s; the warm-up dropped: median of 20 and 22 = 21 s for 2 agents x 2 items x 8 x 256 tokens
    assert got["status"] == "ok" and got["step_s_all"] == [30.0, 20.0, 22.0] and got["step_s"] == 21.0
    assert got["generated_tokens_per_step"] == 8192 and got["s_per_1k_tokens"] == pytest.approx(21_000 / 8192)
    assert got["peak_mem_gib"] == 9.5
    stopped = summarize_comlrl("\n".join(lines[:4]), "", None, w, timed_out=True)  # stopped after two steps
    assert stopped["status"] == "timed_out" and stopped["step_s"] == 20.0 and "2 step(s)" in stopped["reason"]
    failed = summarize_comlrl(lines[0], "Traceback ...\nModuleNotFoundError: No module named 'wandb'", 1, w)
    assert failed["status"] == "failed" and failed["step_s"] is None and "No module named 'wandb'" in failed["reason"]


def test_targets_are_met_missed_or_not_measured() -> None:
    ratios = {"step_vs_comlrl": 3.5, "rollout_vs_hf": 4.0, "roofline_fraction": 0.12, "bf16_vs_fp32": 1.0,
              "update_mfu": 0.3}
    result = {"shapes": {"qwen2.5-0.5b": {"ratios": ratios}, "qwen2.5-1.5b": {"ratios": {"step_vs_comlrl": None}}}}
    rows = {(r["key"], r["shape"]): r["met"] for r in evaluate_targets(result)}
    assert rows[("step_vs_comlrl", "qwen2.5-0.5b")] is True and rows[("rollout_vs_hf", "qwen2.5-0.5b")] is False
    assert rows[("roofline_fraction", "qwen2.5-0.5b")] is True and ("roofline_fraction", "qwen2.5-1.5b") not in rows
    assert rows[("bf16_vs_fp32", "qwen2.5-0.5b")] is False  # equal speed is not faster
    assert rows[("step_vs_comlrl", "qwen2.5-1.5b")] is None and rows[("update_mfu", "qwen2.5-0.5b")] is None


def test_a_carried_wheel_is_installed_when_missing_or_older() -> None:
    assert wheel_name_version("pydantic_core-2.50.5-cp312-cp312-manylinux_2_17_x86_64.whl") == ("pydantic-core", "2.50.5")
    have = {"pydantic-core": None, "typing-extensions": "4.15.0", "protobuf": "7.40.0"}.get
    wheels = ["pydantic_core-2.50.5-cp312-cp312-manylinux_2_17_x86_64.whl", "typing_extensions-4.16.0-py3-none-any.whl",
              "protobuf-7.36.2-cp310-abi3-manylinux2014_x86_64.whl"]
    chosen = dict(select_wheels(wheels, have))
    assert set(chosen) == set(wheels[:2])  # the machine's newer protobuf stays
    assert "not installed" in chosen[wheels[0]] and "installed 4.15.0 is older" in chosen[wheels[1]]
    with pytest.raises(ValueError, match="two wheels of dill"):
        select_wheels(["dill-0.4.1-py3-none-any.whl", "dill-0.3.9-py3-none-any.whl"], have)
    with pytest.raises(ValueError, match="not a wheel file name"):
        wheel_name_version("comlrl.tar.gz")
