"""The MADPO benchmark's comparison: its parts (CoopLab with a step's items one by one and batched,
CoMLRL 1.4.3) interleaved over rounds in their own processes, pooled, the ratios, and the report.
The parts themselves are in :mod:`bench.training.madpo`."""

from __future__ import annotations

import statistics
from dataclasses import asdict, replace
from typing import Any

from bench.training.madpo import madpo_workload
from bench.training.runner import _pool, run_part
from bench.training.vs_comlrl import import_comlrl
from bench.training.workload import Workload


def run_madpo_bench(w: Workload, *, vs_comlrl: bool = False, isolate: bool = True, rounds: int = 1) -> dict[str, Any]:
    """The MADPO parts (engine with items one by one, engine with a step's items batched, CoMLRL),
    interleaved over ``rounds``, pooled, and the CoMLRL/engine ratios, as one JSON-able dict."""
    if vs_comlrl:
        import_comlrl()  # fail before the slow parts when CoMLRL is missing
    w = madpo_workload(w)
    plan = {"engine": ("madpo_engine", replace(w, items_per_step=1)),
            "engine_batched": ("madpo_engine", replace(w, items_per_step=w.items_per_update))}
    if vs_comlrl:
        plan["comlrl"] = ("madpo_comlrl", w)
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
    for _ in range(rounds):
        for name, (part, workload) in plan.items():
            collected[name].append(run_part(part, workload, isolate=isolate))
    result: dict[str, Any] = {"algorithm": "madpo", "workload": asdict(w), "rounds": rounds}
    for name, parts in collected.items():
        pooled = _pool(parts, w)
        pooled["collect_cpu_s_per_item"] = statistics.median(p["collect_cpu_s_per_item"] for p in parts)
        pooled["collect_s_per_item"] = statistics.median(p["collect_s"] / p["items"] for p in parts)
        result[name] = pooled
    if vs_comlrl:
        theirs = result["comlrl"]
        for name in ("engine", "engine_batched"):
            ours = result[name]
            result[f"speedup_{name}_step"] = theirs["step_cpu_s_median"] / ours["step_cpu_s_median"]
            result[f"speedup_{name}_step_wall"] = theirs["step_s_median"] / ours["step_s_median"]
            result[f"speedup_{name}_collect"] = theirs["collect_cpu_s_per_item"] / ours["collect_cpu_s_per_item"]
    return result


def format_madpo_report(result: dict[str, Any]) -> str:
    """A plain-text table of the MADPO benchmark result."""
    w = result["workload"]
    header = (f"{'':15}{'pairs':>6}{'collect CPU s/item':>19}{'collect wall s/item':>20}{'DPO CPU s/step':>15}"
              f"{'DPO wall s/step':>16}{'peak MiB':>9}   (medians)")
    lines = [f"MADPO workload: {w['num_agents']} agents, tiny-{w['arch']}-{w['size']}, {w['num_generations']} "
             f"candidates per agent and item, {w['max_new_tokens']} new tokens (no EOS), {w['items_per_update']} "
             f"pairs per item and per DPO step, {w['steps']} timed steps after {w['warmup_steps']} warm-up, "
             f"x{result['rounds']} rounds, {w['threads']} thread(s)", header]
    for name in ("engine", "engine_batched", "comlrl"):
        part = result.get(name)
        if part is not None:
            lines.append(f"{name:15}{part['pairs']:>6}{part['collect_cpu_s_per_item']:>19.3f}"
                         f"{part['collect_s_per_item']:>20.3f}{part['step_cpu_s_median']:>15.3f}"
                         f"{part['step_s_median']:>16.3f}{part['peak_mem_mb']:>9.0f}")
    for name in ("engine", "engine_batched"):
        if f"speedup_{name}_step" in result:
            lines.append(f"{name} vs CoMLRL: DPO step {result[f'speedup_{name}_step']:.2f}x faster "
                         f"({result[f'speedup_{name}_step_wall']:.2f}x wall), collection "
                         f"{result[f'speedup_{name}_collect']:.2f}x faster per item")
    return "\n".join(lines)
