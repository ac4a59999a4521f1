"""The benchmark of record's result: its JSON file, the targets it is held to, and the printed report."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

FORMULAS = {
    "s_per_1k_tokens": "whole step seconds (median of the timed steps) * 1000 / generated tokens per step; "
                       "generated tokens = agents * prompts * K * new tokens (EOS unreachable)",
    "rollout_tokens_per_s": "generated tokens per step / the trainer's perf/generate_s",
    "update_tokens": "agents * (prompts * prompt tokens + prompts * K * new tokens): each prompt once, every completion token",
    "update_mfu": "6 * parameters * update_tokens / perf/update_s / peak dense bf16 FLOP/s of the device "
                  "(attention's sequence-length products not counted)",
    "lean_step_s": "(seconds of the full sampling call - seconds of a one-token call on the same batch) / (new tokens - 1)",
    "roofline_fraction": "(weight bytes / HBM bytes per second) / lean_step_s: the least time a decode step can take "
                         "(every weight read once; KV cache reads not counted) over the measured one",
    "rollout_vs_hf": "seconds of generate on the batch / seconds of the engine's sampler on it (same tokens)",
    "bf16_vs_fp32": "seconds of the float32 sampling call / seconds of the bfloat16 one (same batch and tokens)",
    "static_vs_loop": "seconds of the sampling call through the lean decoder's loop (decode_graphs off) / through the "
                      "static path (decode_graphs on: static KV cache, CUDA graphs), each after a warm-up call",
    "step_vs_comlrl": "CoMLRL's s_per_1k_tokens / CoopLab's s_per_1k_tokens (whole steps, per generated token)",
}

# (what, key in a shape's ratios, threshold, only the first shape): a shape meets a target when value >= threshold
TARGETS = [
    ("whole step vs CoMLRL 1.4.3, per generated token", "step_vs_comlrl", 3.0, False),
    ("rollout vs Hugging Face generate, same batch", "rollout_vs_hf", 5.0, False),
    ("fraction of the decode roofline at the record's batch", "roofline_fraction", 0.10, True),
    ("bfloat16 decode faster than float32 (fp32 s / bf16 s)", "bf16_vs_fp32", 1.0, True),
    ("update MFU (reported for every shape; no threshold)", "update_mfu", None, False),
]


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target and measured shape: the value, the threshold and whether it was met
    (None where it was not measured, or has no threshold)."""
    rows = []
    shapes = list(result.get("shapes", {}))
    for what, key, threshold, first_only in TARGETS:
        for shape in shapes[:1] if first_only else shapes:
            value = result["shapes"][shape].get("ratios", {}).get(key)
            met = None if value is None or threshold is None else value >= threshold
            if key == "bf16_vs_fp32" and value is not None:
                met = value > threshold
            rows.append({"target": what, "key": key, "shape": shape, "value": value, "threshold": threshold,
                         "met": met})
    return rows


def _plain(value: Any) -> Any:
    """JSON for what json cannot write itself: tensors and numpy scalars as numbers, the rest as text."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def write_json(result: dict[str, Any], path: str | Path | None) -> None:
    """Write ``result`` to ``path`` (written aside, then renamed: a run stopped mid-write leaves the last
    complete file). NaN and infinities become null."""
    if path is None:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_finite(result), indent=1, default=_plain)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text)
    os.replace(partial, target)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _n(value: Any, fmt: str = ".3g", unit: str = "") -> str:
    return "-" if value is None else f"{format(value, fmt)}{unit}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def format_shape(shape: str, s: dict[str, Any]) -> list[str]:
    """A measured shape's lines: the team's phases, the sampling call, CoMLRL."""
    t, d, c, r = s["cooplab"], s.get("decode", {}), s.get("comlrl", {}), s.get("ratios", {})
    lp = t.get("logprob_pass", {})
    lines = [
        f"{shape}: {s['params'] / 1e6:.0f} M parameters, {s['weight_bytes'] / 1e9:.2f} GB of weights",
        f"  step {_n(t['step_s'])} s ({_n(t['s_per_1k_tokens'])} s per 1k generated tokens); rollout {_n(t['rollout_s'])} s "
        f"({_n(t['rollout_tokens_per_s'], ',.0f')} tokens/s); update {_n(t['update_s'])} s "
        f"({_n(t['update_tokens_per_s'], ',.0f')} tokens/s, MFU {_pct(t['update_mfu'])}); log-prob pass "
        f"{_n(lp.get('in_step_s'))} s in the step ({_n(lp.get('standalone_s'))} s standalone); weight refresh "
        f"{_n(t['weight_refresh_s'])} s; peak {_n(t['peak_mem_gib'], '.1f')} GiB",
    ]
    if d:
        lines.append(
            f"  sampling call, batch {d['batch']} x {d['new_tokens']} tokens: engine {_n(d['lean_s'])} s "
            f"({_n(d['lean_tokens_per_s'], ',.0f')} tokens/s, {_n(d['lean_step_s'] and 1000 * d['lean_step_s'])} ms per "
            f"decode step, {_pct(d.get('roofline_fraction'))} of the roofline); generate {_n(d.get('hf_generate_s'))} s "
            f"-> {_n(r.get('rollout_vs_hf'), '.2f')}x")
        if "static" in d:
            st, lo = d["static"], d["loop"]
            lines.append(
                f"  token loops: static {_n(st['s'])} s ({_n(st['tokens_per_s'], ',.0f')} tokens/s, "
                f"{_n(st.get('step_s') and 1000 * st['step_s'])} ms per step, bucket {st.get('bucket')}, "
                f"{st.get('graphs_captured_warmup')} graphs captured in its warm-up) vs lean loop {_n(lo['s'])} s "
                f"({_n(lo['tokens_per_s'], ',.0f')} tokens/s) -> {_n(d.get('static_vs_loop'), '.2f')}x; vs generate: "
                f"static {_n(d.get('static_vs_hf'), '.2f')}x, loop {_n(d.get('loop_vs_hf'), '.2f')}x; same tokens: "
                f"{d.get('same_tokens_static_loop')}")
        if "float32" in d:
            f = d["float32"]
            lines.append(f"  float32 sampling call: {_n(f['lean_s'])} s ({_n(f['lean_tokens_per_s'], ',.0f')} tokens/s); "
                         f"bf16 / fp32 speed {_n(r.get('bf16_vs_fp32'), '.2f')}x; bf16 copy refresh "
                         f"{_n(f.get('bf16_copy_refresh_s'))} s")
    probe = d.get("attention_probe")
    if probe:
        for dtype in ("bfloat16", "float32"):
            cells = [f"{name} " + ("refused" if "error" in v else
                                   f"{_n(1e6 * v['first_pass_s'], '.0f')}/{_n(1e6 * v['second_pass_s'], '.0f')} us")
                     for name, v in probe[dtype].items()]
            lines.append(f"  decode attention per call, {dtype} (first/second pass): " + ", ".join(cells))
    if c:
        if c.get("s_per_1k_tokens") is not None:
            lines.append(f"  CoMLRL 1.4.3 ({c['status']}): {_n(c['step_s'])} s per step of {c['items_per_step']} item(s) "
                         f"({_n(c['s_per_1k_tokens'])} s per 1k tokens) -> CoopLab {_n(r.get('step_vs_comlrl'), '.2f')}x "
                         f"per generated token")
        else:
            lines.append(f"  CoMLRL 1.4.3: {c['status']}: {c.get('reason', '')}")
    return lines


def format_report(result: dict[str, Any]) -> str:
    """The printed report: the device, each measured shape, the skipped ones and the targets."""
    dev, w = result["device"], result["workload"]
    lines = [f"GPU benchmark of record on {dev['name']} ({dev['type']}; torch {dev['torch']}, transformers "
             f"{dev['transformers']}): {w['num_agents']} agents, {w['prompts']} prompts of {w['prompt_tokens']} tokens x "
             f"K={w['num_generations']}, {w['max_new_tokens']} new tokens, {w['dtype']}, {w['steps']} timed step(s) "
             f"after {w['warmup_steps']}"]
    for shape, s in result["shapes"].items():
        lines += format_shape(shape, s)
    for shape, reason in result.get("skipped", {}).items():
        lines.append(f"{shape}: skipped: {reason}")
    for shape, reason in result.get("failed", {}).items():
        lines.append(f"{shape}: failed: {reason}")
    for row in result.get("targets", []):
        verdict = {True: "MET", False: "MISSED", None: "reported" if row["threshold"] is None and row["value"] is not None
                   else "not measured"}[row["met"]]
        threshold = "" if row["threshold"] is None else f" (target >= {row['threshold']:g})"
        lines.append(f"target {row['target']}, {row['shape']}: {_n(row['value'], '.3g')}{threshold}: {verdict}")
    lines.append(f"elapsed {result.get('elapsed_s', 0):.0f} s" + ("" if result.get("complete") else " (incomplete)"))
    return "\n".join(lines)
