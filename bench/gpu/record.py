"""Run the benchmark of record: every shape in turn within a time budget, the JSON written after each part.

Per shape: the CoopLab team (:mod:`bench.gpu.cooplab_side`), the sampling call against ``generate``
(:mod:`bench.gpu.decode`; for the first shape also in float32), then CoMLRL in a subprocess
(:mod:`bench.gpu.comlrl_side`). A shape is skipped, with the reason, when its estimated training
memory exceeds the device's or when its estimated time (the previous shape's, scaled by the
parameter count) no longer fits the budget.
"""

from __future__ import annotations

import gc
import platform
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.gpu.comlrl_side import run_comlrl_side, step_ratio
from bench.gpu.cooplab_side import (
    logprob_pass,
    peak_memory,
    reset_peak_memory,
    step_records,
    summarize_team,
    train_team,
)
from bench.gpu.decode import attention_probe, decode_phase, float32_decode
from bench.gpu.report import FORMULAS, evaluate_targets, write_json
from bench.gpu.roofline import (
    decode_floor_s,
    device_peak,
    ratio,
    roofline_fraction,
    shape_seconds_estimate,
    train_memory_bytes,
)
from bench.gpu.workload import GpuWorkload, build_team, parameter_count, prompt_texts, weight_bytes
from bench.shapes import SHAPES

SCHEMA = "cooplab.gpu_bench/1"
MEMORY_HEADROOM = 0.92  # a shape runs when its estimated training memory is under this share of the device's


def describe_device(device: str) -> dict[str, Any]:
    """The device's name, its table peaks and the software versions."""
    import torch
    import transformers

    cuda = device.startswith("cuda")
    name = torch.cuda.get_device_name(device) if cuda else cpu_name()
    peak = device_peak(name) if cuda else None
    try:
        from importlib.metadata import version

        comlrl = version("comlrl")
    except Exception:  # noqa: BLE001 (not installed)
        comlrl = None
    return {"name": name, "type": "cuda" if cuda else "cpu", "torch": torch.__version__,
            "transformers": transformers.__version__, "cuda": torch.version.cuda, "comlrl": comlrl,
            "peak_label": peak.label if peak else None, "peak_bf16_flops": peak.bf16_flops if peak else None,
            "hbm_bytes_per_s": peak.hbm_bytes_per_s if peak else None,
            "total_memory_gib": torch.cuda.get_device_properties(device).total_memory / 2**30 if cuda else None}


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the machine type."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine() or "cpu"


def shape_parameters(shape: str) -> int:
    """The shape's parameter count, from a model built on the meta device (no memory, no weights)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(Qwen2Config(**SHAPES[shape]))
    return parameter_count(model)


def memory_skip_reason(shape: str, w: GpuWorkload, device_info: dict[str, Any]) -> str | None:
    """Why ``shape`` cannot train on this device (None: it fits, or the device is a CPU)."""
    total = device_info.get("total_memory_gib")
    if total is None:
        return None
    s = SHAPES[shape]
    need = train_memory_bytes(shape_parameters(shape), w.num_agents, param_bytes=2 if w.dtype != "float32" else 4,
                              micro_rows=w.micro_batch_size or w.batch, seq_tokens=w.prompt_tokens + w.max_new_tokens,
                              hidden=s["hidden_size"], layers=s["num_hidden_layers"], vocab=s["vocab_size"],
                              new_tokens=w.max_new_tokens) / 2**30
    if need > MEMORY_HEADROOM * total:
        return f"memory: its training needs about {need:.0f} GiB, over {MEMORY_HEADROOM:.0%} of the device's {total:.0f} GiB"
    return None


def free_memory(device: str) -> None:
    """Drop what the last part left (models, optimizer state, cached blocks)."""
    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def run_shape(shape: str, w: GpuWorkload, device: str, device_info: dict[str, Any], *, float32: bool,
              progress: Callable[[str], None]) -> dict[str, Any]:
    """CoopLab's team on ``shape`` and the sampling call on its batch (CoMLRL is run by the caller)."""
    reset_peak_memory(device)
    models, tokenizer = build_team(shape, device, w)
    params, wbytes = parameter_count(models[0]), weight_bytes(models[0])
    trainer, sink, reward = train_team(models, tokenizer, w, device)
    peak, kind = peak_memory(device)
    steps = step_records(sink)
    team = summarize_team(steps, w, params, device_info["peak_bf16_flops"])
    team.update(steps=steps, peak_mem_gib=peak, peak_mem_kind=kind,
                mean_completion_words=reward.words / max(reward.completions, 1))
    progress(f"{shape}: {len(steps)} steps, {team['step_s']:.3g} s per timed step")
    vocab = SHAPES[shape]["vocab_size"]
    prompt_ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in prompt_texts(w, w.prompts, vocab)]
    for runtime in trainer.agents:  # training is over: AdamW's moments would only crowd the calls below
        runtime.optimizer.state.clear()
    free_memory(device)
    agent = trainer.agents[0]
    agent.model.eval()
    decode, gen = decode_phase(agent.model, tokenizer, prompt_ids, w, device)
    mask = gen.completion_mask.bool()
    completions = [row[m].tolist() for row, m in zip(gen.completion_ids, mask, strict=True)]
    team["logprob_pass"] = logprob_pass(agent, prompt_ids, completions, device, w.num_generations)
    trainer.close()
    del trainer, sink, agent, models, gen
    free_memory(device)
    hbm = device_info["hbm_bytes_per_s"]
    decode["roofline_floor_s"] = decode_floor_s(wbytes, hbm) if hbm else None
    decode["roofline_fraction"] = roofline_fraction(wbytes, hbm, decode["lean_step_s"])
    trainer_step = None if team["rollout_s"] is None else team["rollout_s"] / (w.num_agents * w.max_new_tokens)
    decode["trainer_rollout_step_s"] = trainer_step
    decode["trainer_rollout_roofline_fraction"] = roofline_fraction(wbytes, hbm, trainer_step)
    progress(f"{shape}: sampling call {decode['lean_s']:.3g} s, generate {decode.get('hf_generate_s', 0):.3g} s")
    if float32:
        decode["float32"] = float32_decode(shape, tokenizer, prompt_ids, w, device)
        free_memory(device)
        progress(f"{shape}: float32 sampling call {decode['float32']['lean_s']:.3g} s")
        # the record's decode shape on a GPU; a token-sized one on the CPU (the suite's run)
        decode["attention_probe"] = (attention_probe(device) if device.startswith("cuda") else
                                     attention_probe(device, heads=2, kv_heads=1, head_dim=16, rows=2,
                                                     lengths=range(9, 25, 8)))
    return {"params": params, "weight_bytes": wbytes, "cooplab": team, "decode": decode,
            "ratios": {"rollout_vs_hf": decode.get("rollout_vs_hf"), "roofline_fraction": decode["roofline_fraction"],
                       "bf16_vs_fp32": ratio(decode["float32"]["lean_s"], decode["lean_s"]) if float32 else None,
                       "update_mfu": team["update_mfu"], "step_vs_comlrl": None,
                       "static_vs_loop": decode.get("static_vs_loop")}}


def run_record(w: GpuWorkload, device: str, *, budget_s: float = 420.0, json_path: Any = None, comlrl: bool = True,
               comlrl_timeout_s: float = 150.0, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Every shape of ``w`` that fits (memory, budget), CoMLRL after each; the result as written to ``json_path``."""
    w.check()
    started = time.perf_counter()
    info = describe_device(device)
    result: dict[str, Any] = {"schema": SCHEMA, "device": info, "workload": asdict(w), "formulas": FORMULAS,
                              "budget_s": budget_s, "shapes": {}, "skipped": {}, "failed": {}, "complete": False}
    last: dict[str, Any] | None = None  # the last measured shape: its CoopLab parts' seconds, update seconds, size

    def elapsed() -> float:
        return time.perf_counter() - started

    def save() -> None:
        result["elapsed_s"] = elapsed()
        result["targets"] = evaluate_targets(result)
        write_json(result, json_path)

    for shape in w.shapes:
        reason = memory_skip_reason(shape, w, info)
        if reason is None and last is not None:
            estimate = shape_seconds_estimate(
                last["seconds"], last["update_s"], params_ratio=shape_parameters(shape) / last["params"],
                layers_ratio=SHAPES[shape]["num_hidden_layers"] / last["layers"])
            if elapsed() + estimate > budget_s:
                reason = (f"budget: about {estimate:.0f} s needed, {max(budget_s - elapsed(), 0):.0f} s of the "
                          f"{budget_s:.0f} s budget left")
        if reason is not None:
            result["skipped"][shape] = reason
            progress(f"{shape}: skipped: {reason}")
            save()
            continue
        began = elapsed()
        failure = None
        try:
            shaped = run_shape(shape, w, device, info, float32=not result["shapes"], progress=progress)
        except Exception as exc:  # noqa: BLE001 (out of memory, a kernel error: reported, the next shape runs)
            failure = f"{type(exc).__name__}: {str(exc)[:2000]}"
        if failure is not None:  # outside the except clause, so its traceback no longer holds the models
            result["failed"][shape] = failure
            progress(f"{shape}: failed: {failure}")
            free_memory(device)
            save()
            continue
        team = shaped["cooplab"]
        last = {"seconds": elapsed() - began, "params": shaped["params"], "layers": SHAPES[shape]["num_hidden_layers"],
                "update_s": sum(s["update_s"] or 0.0 for s in team["steps"])}
        result["shapes"][shape] = shaped
        save()
        left = budget_s - elapsed()
        if not comlrl:
            shaped["comlrl"] = {"status": "skipped", "reason": "--no-comlrl"}
        elif left < 30:
            shaped["comlrl"] = {"status": "skipped", "reason": f"budget: {max(left, 0):.0f} s left"}
        else:
            shaped["comlrl"] = run_comlrl_side(shape, w, device, timeout_s=min(comlrl_timeout_s, left))
        shaped["ratios"]["step_vs_comlrl"] = step_ratio(shaped["cooplab"]["s_per_1k_tokens"], shaped["comlrl"])
        progress(f"{shape}: CoMLRL {shaped['comlrl']['status']}")
        save()
    result["complete"] = True
    save()
    return result
