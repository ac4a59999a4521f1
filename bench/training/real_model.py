"""The real-model benchmark: ``cooplab bench --model builtin:smollm2-135m`` (or any model folder).

Two agents of a pretrained model (K samples, one item per step by default, plain-text prompts), with
every completion forced to the full length (EOS made unreachable, :func:`bench.training.workload.never_eos`)
so each part does the same arithmetic. Parts, each in its own process (own peak memory) and
interleaved over ``rounds``: CoopLab's trainer and, when CoMLRL 1.4.3 is installed, CoMLRL's
``MAGRPOTrainer`` on the same models, prompts, K and lengths. Reported per part: median wall and CPU
seconds per step over every round's timed steps (after the warm-up, which also pays the optimizer
state allocation), generate/update phases, generated tokens per second, peak memory; with CoMLRL,
the speed-up per step and per generated token. Without CoMLRL, CoopLab alone, with a line saying so.

With ``cores`` > 1, parts on that many cores, compared by wall clock: CoopLab with its defaults
(``parallel_training="auto"`` runs the two agents in threads, a share of the cores each), CoopLab
with ``parallel_training="none"`` on all the cores (what ``auto`` is weighed against), and CoMLRL
with that many torch threads; the speed-up on N cores is against CoMLRL's better of 1 and N threads.
"""

from __future__ import annotations

from dataclasses import asdict, replace
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


def run_real_bench(w: Workload, *, rounds: int = 1, vs_comlrl: bool | None = None, isolate: bool = True,
                   cores: int = 1) -> dict[str, Any]:
    """CoopLab (and CoMLRL when ``vs_comlrl``, by default when it is installed) on ``w.model``; with
    ``cores`` > 1 also the parts on that many cores (module docstring)."""
    if w.model is None:
        raise ValueError("the real-model benchmark needs a model source (--model builtin:smollm2-135m or a folder)")
    installed = comlrl_installed()
    if vs_comlrl is None:
        vs_comlrl = installed
    elif vs_comlrl:
        import_comlrl()  # ComlrlMissingError with the install command, before any slow part
    plan = {"engine": ("engine", replace(w, rollout_dtype=None))}
    if w.rollout_dtype:
        plan["engine_rollout"] = ("engine", w)
    if vs_comlrl:
        plan["comlrl"] = ("comlrl", w)
    if cores > 1:
        plan["engine_cores"] = ("engine", replace(w, threads=cores, parallel="auto", rollout_dtype=None))
        if w.rollout_dtype:
            plan["engine_cores_rollout"] = ("engine", replace(w, threads=cores, parallel="auto"))
        plan["engine_cores_sequential"] = ("engine", replace(w, threads=cores, parallel="none", rollout_dtype=None))
        if vs_comlrl:
            plan["comlrl_cores"] = ("comlrl", replace(w, threads=cores))
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
    for _ in range(rounds):
        for name, (part, workload) in plan.items():
            collected[name].append(run_part(part, workload, isolate=isolate))
    result: dict[str, Any] = {"workload": asdict(w), "rounds": rounds, "vs_comlrl": vs_comlrl,
                              "comlrl_installed": installed, "cores": cores}
    result.update({name: _pool(runs, w) for name, runs in collected.items()})
    tokens_per_step = w.num_agents * w.items_per_update * w.num_generations * w.max_new_tokens
    for name in plan:
        result[name]["tokens_per_step"] = tokens_per_step if w.full_length else None
        result[name]["s_per_1k_tokens"] = (1000 * result[name]["step_s_median"] / tokens_per_step
                                           if w.full_length else None)
    if vs_comlrl:
        result["speedup_cpu"] = result["comlrl"]["step_cpu_s_median"] / result["engine"]["step_cpu_s_median"]
        result["speedup_wall"] = result["comlrl"]["step_s_median"] / result["engine"]["step_s_median"]
        if w.rollout_dtype:
            result["speedup_rollout_cpu"] = (result["comlrl"]["step_cpu_s_median"]
                                             / result["engine_rollout"]["step_cpu_s_median"])
    if cores > 1:
        result["auto_gain_wall"] = (result["engine_cores_sequential"]["step_s_median"]
                                    / result["engine_cores"]["step_s_median"])
        if vs_comlrl:
            best = min(result["comlrl"]["step_s_median"], result["comlrl_cores"]["step_s_median"])
            result["speedup_cores_wall"] = best / result["engine_cores"]["step_s_median"]
            if w.rollout_dtype:
                result["speedup_cores_rollout_wall"] = best / result["engine_cores_rollout"]["step_s_median"]
    return result


def format_real_report(result: dict[str, Any]) -> str:
    """A plain-text table of :func:`run_real_bench`'s result."""
    w = result["workload"]
    lines = [f"real model: {w['num_agents']} agents of {w['model']}, K={w['num_generations']}, "
             f"{w['max_new_tokens']} new tokens" + (" (forced: no EOS)" if w["full_length"] else "")
             + f", {w['items_per_update']} item(s) per step, {w['steps']} timed steps after {w['warmup_steps']} "
             f"warm-up, x{result['rounds']} rounds, {w['threads']} thread(s), {w.get('dtype') or 'float32'} weights",
             f"{'':24}{'wall s/step':>12}{'CPU s/step':>11}{'generate s':>11}{'update s':>9}{'tokens/s':>9}"
             f"{'s/1k tok':>9}{'peak MiB':>9}   (medians of timed steps; phases are means)"]
    for part in ("engine", "engine_rollout", "comlrl", "engine_cores", "engine_cores_rollout",
                 "engine_cores_sequential", "comlrl_cores"):
        r = result.get(part)
        if r is None:
            continue
        phases = r.get("phases", {})
        cells = [f"{phases[k]:.2f}" if k in phases else "-" for k in ("generate_s", "update_s")]
        tokens = f"{r['tokens_per_s']:.0f}" if "tokens_per_s" in r else "-"
        per_1k = f"{r['s_per_1k_tokens']:.1f}" if r.get("s_per_1k_tokens") else "-"
        lines.append(f"{part:24}{r['step_s_median']:>12.2f}{r['step_cpu_s_median']:>11.2f}{cells[0]:>11}"
                     f"{cells[1]:>9}{tokens:>9}{per_1k:>9}{r['peak_mem_mb']:>9.0f}")
    if result["vs_comlrl"]:
        lines.append(f"CoopLab is {result['speedup_cpu']:.2f}x CoMLRL per step by CPU time "
                     f"({result['speedup_wall']:.2f}x wall), equal work")
        if "speedup_rollout_cpu" in result:
            lines.append(f"CoopLab with rollout_dtype={w['rollout_dtype']} (engine_rollout) is "
                         f"{result['speedup_rollout_cpu']:.2f}x CoMLRL per step by CPU time")
    elif result.get("comlrl_installed"):
        lines.append("CoMLRL was not asked for (vs_comlrl=False): CoopLab alone")
    else:
        lines.append(f"CoMLRL is not installed: CoopLab alone (to compare: {COMLRL_INSTALL})")
    if "auto_gain_wall" in result:
        cores = result["cores"]
        line = (f"on {cores} cores (wall clock): CoopLab's defaults (agents in threads: "
                f"{result['engine_cores'].get('agents_in_threads')}) {result['auto_gain_wall']:.2f}x "
                f"parallel_training='none' on {cores} threads")
        if "speedup_cores_wall" in result:
            line += f"; {result['speedup_cores_wall']:.2f}x CoMLRL's better of 1 and {cores} threads"
            if "speedup_cores_rollout_wall" in result:
                line += (f"; with rollout_dtype={w['rollout_dtype']} (engine_cores_rollout) "
                         f"{result['speedup_cores_rollout_wall']:.2f}x")
        lines.append(line)
    return "\n".join(lines)
