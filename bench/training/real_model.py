"""The real-model benchmark: ``cooplab bench --model builtin:smollm2-135m`` (or any model folder).

Two agents of a pretrained model (K samples, one item per step by default, plain-text prompts), with
every completion forced to the full length (EOS made unreachable, :func:`bench.training.workload.never_eos`)
so each part does the same arithmetic. Parts, each in its own process (own peak memory) and
interleaved over ``rounds``: CoopLab's trainer and, when CoMLRL 1.4.3 is installed, CoMLRL's
``MAGRPOTrainer`` on the same models, prompts, K and lengths. Reported per part: median wall and CPU
seconds per step over every round's timed steps (after the warm-up, which also pays the optimizer
state allocation), generate/update phases, generated tokens per second, peak memory; with CoMLRL,
the speed-up per step and per generated token. Without CoMLRL, CoopLab alone, with a line saying so.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bench.training.runner import _pool, run_part
from bench.training.vs_comlrl import COMLRL_INSTALL, ComlrlMissingError, import_comlrl
from bench.training.workload import Workload

REAL_DEFAULTS = {"max_new_tokens": 48, "items_per_update": 1, "steps": 3, "full_length": True}


def comlrl_installed() -> bool:
    try:
        import_comlrl()
    except ComlrlMissingError:
        return False
    return True


def run_real_bench(w: Workload, *, rounds: int = 1, vs_comlrl: bool | None = None,
                   isolate: bool = True) -> dict[str, Any]:
    """CoopLab (and CoMLRL when ``vs_comlrl``, by default when it is installed) on ``w.model``."""
    if w.model is None:
        raise ValueError("the real-model benchmark needs a model source (--model builtin:smollm2-135m or a folder)")
    installed = comlrl_installed()
    if vs_comlrl is None:
        vs_comlrl = installed
    elif vs_comlrl:
        import_comlrl()  # ComlrlMissingError with the install command, before any slow part
    parts = ["engine"] + (["comlrl"] if vs_comlrl else [])
    collected: dict[str, list[dict[str, Any]]] = {p: [] for p in parts}
    for _ in range(rounds):
        for part in parts:
            collected[part].append(run_part(part, w, isolate=isolate))
    result: dict[str, Any] = {"workload": asdict(w), "rounds": rounds, "vs_comlrl": vs_comlrl,
                              "comlrl_installed": installed}
    result.update({part: _pool(runs, w) for part, runs in collected.items()})
    tokens_per_step = w.num_agents * w.items_per_update * w.num_generations * w.max_new_tokens
    for part in parts:
        result[part]["tokens_per_step"] = tokens_per_step if w.full_length else None
        result[part]["s_per_1k_tokens"] = (1000 * result[part]["step_s_median"] / tokens_per_step
                                           if w.full_length else None)
    if vs_comlrl:
        result["speedup_cpu"] = result["comlrl"]["step_cpu_s_median"] / result["engine"]["step_cpu_s_median"]
        result["speedup_wall"] = result["comlrl"]["step_s_median"] / result["engine"]["step_s_median"]
    return result


def format_real_report(result: dict[str, Any]) -> str:
    """A plain-text table of :func:`run_real_bench`'s result."""
    w = result["workload"]
    lines = [f"real model: {w['num_agents']} agents of {w['model']}, K={w['num_generations']}, "
             f"{w['max_new_tokens']} new tokens" + (" (forced: no EOS)" if w["full_length"] else "")
             + f", {w['items_per_update']} item(s) per step, {w['steps']} timed steps after {w['warmup_steps']} "
             f"warm-up, x{result['rounds']} rounds, {w['threads']} thread(s)",
             f"{'':10}{'wall s/step':>12}{'CPU s/step':>11}{'generate s':>11}{'update s':>9}{'tokens/s':>9}"
             f"{'s/1k tok':>9}{'peak MiB':>9}   (medians of timed steps; phases are means)"]
    for part in ("engine", "comlrl"):
        r = result.get(part)
        if r is None:
            continue
        phases = r.get("phases", {})
        cells = [f"{phases[k]:.2f}" if k in phases else "-" for k in ("generate_s", "update_s")]
        tokens = f"{r['tokens_per_s']:.0f}" if "tokens_per_s" in r else "-"
        per_1k = f"{r['s_per_1k_tokens']:.1f}" if r.get("s_per_1k_tokens") else "-"
        lines.append(f"{part:10}{r['step_s_median']:>12.2f}{r['step_cpu_s_median']:>11.2f}{cells[0]:>11}"
                     f"{cells[1]:>9}{tokens:>9}{per_1k:>9}{r['peak_mem_mb']:>9.0f}")
    if result["vs_comlrl"]:
        lines.append(f"CoopLab is {result['speedup_cpu']:.2f}x CoMLRL per step by CPU time "
                     f"({result['speedup_wall']:.2f}x wall), equal work")
    elif result.get("comlrl_installed"):
        lines.append("CoMLRL was not asked for (vs_comlrl=False): CoopLab alone")
    else:
        lines.append(f"CoMLRL is not installed: CoopLab alone (to compare: {COMLRL_INSTALL})")
    return "\n".join(lines)
