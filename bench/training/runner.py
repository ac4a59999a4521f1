"""Running the parts (each in its own process), pooling rounds, the report, and the command line."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.training.madpo import run_comlrl_madpo, run_engine_madpo
from bench.training.parts import run_bare, run_decoders, run_engine
from bench.training.vs_comlrl import ComlrlMissingError, import_comlrl, run_comlrl
from bench.training.workload import Workload

PARTS = {"engine": run_engine, "bare": run_bare, "comlrl": run_comlrl, "decoders": run_decoders,
         "madpo_engine": run_engine_madpo, "madpo_comlrl": run_comlrl_madpo}


# ---------------------------------------------------------------------------------------------
# orchestration and report


def run_part(part: str, w: Workload, *, isolate: bool = True) -> dict[str, Any]:
    """Run one part, in a fresh Python process when ``isolate`` (own imports and peak memory)."""
    if part not in PARTS:
        raise ValueError(f"unknown bench part {part!r}; expected one of {sorted(PARTS)}")
    if part in ("comlrl", "madpo_comlrl"):
        import_comlrl()  # fail early, with the install hint, before any subprocess starts
    if not isolate:
        return PARTS[part](w)
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "bench.training", "--part", part, "--workload", json.dumps(asdict(w))]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"bench part {part!r} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _pool(rounds: list[dict[str, Any]], w: Workload) -> dict[str, Any]:
    """One part's rounds merged: the timed steps of every round pooled, other values from round 1."""
    timed = {
        key: [x for r in rounds for x in r[key][w.warmup_steps :]] for key in ("step_wall_s", "step_cpu_s")
    }
    merged = dict(rounds[0])
    merged.update(
        step_s_mean=statistics.fmean(timed["step_wall_s"]),
        step_s_median=statistics.median(timed["step_wall_s"]),
        step_cpu_s_mean=statistics.fmean(timed["step_cpu_s"]),
        step_cpu_s_median=statistics.median(timed["step_cpu_s"]),
        step_wall_s=[x for r in rounds for x in r["step_wall_s"]],
        step_cpu_s=[x for r in rounds for x in r["step_cpu_s"]],
        peak_mem_mb=max(r["peak_mem_mb"] for r in rounds),
        rounds=len(rounds),
    )
    return merged


def run_bench(
    w: Workload, *, vs_comlrl: bool = False, isolate: bool = True, rounds: int = 1, cores: int = 1
) -> dict[str, Any]:
    """Every part of the benchmark and the derived ratios, as one JSON-able dict.

    With several ``rounds`` the parts run interleaved (engine, batched engine, bare, CoMLRL, then
    again), so a change in the machine's load hits every part alike. Ratios use the median CPU
    seconds per step; wall-clock figures are reported next to them.

    With ``cores`` > 1 two more parts use that many cores, compared by wall clock: the engine with
    its agents in parallel (``parallel_training="mp"`` on CPU devices, the cores shared out among
    the agents) and CoMLRL with ``cores`` torch threads (its only way to use them on a CPU).
    """
    if vs_comlrl:
        import_comlrl()  # fail before the slow parts when CoMLRL is missing
    plan = {
        "engine": ("engine", replace(w, items_per_step=1)),
        "engine_batched": ("engine", replace(w, items_per_step=w.items_per_update)),
        "bare": ("bare", w),
    }
    if vs_comlrl:
        plan["comlrl"] = ("comlrl", w)
    if cores > 1:
        plan["engine_mp"] = ("engine", replace(w, items_per_step=1, parallel="mp", threads=cores))
        plan["engine_mp_batched"] = ("engine", replace(w, items_per_step=w.items_per_update, parallel="mp",
                                                        threads=cores))
        if vs_comlrl:
            plan["comlrl_cores"] = ("comlrl", replace(w, threads=cores))
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
    for _ in range(rounds):
        for name, (part, workload) in plan.items():
            collected[name].append(run_part(part, workload, isolate=isolate))
    result: dict[str, Any] = {"workload": asdict(w), "rounds": rounds, "cores": cores}
    result.update({name: _pool(parts, w) for name, parts in collected.items()})
    result["decoders"] = run_part("decoders", w, isolate=isolate)
    for name in ("engine", "engine_batched"):
        cpu = result[name]["step_cpu_s_median"]
        result[f"overhead_{name}"] = cpu / result["bare"]["step_cpu_s_median"]
        result[f"overhead_{name}_wall"] = result[name]["step_s_median"] / result["bare"]["step_s_median"]
        if vs_comlrl:
            result[f"speedup_{name}"] = result["comlrl"]["step_cpu_s_median"] / cpu
            result[f"speedup_{name}_wall"] = result["comlrl"]["step_s_median"] / result[name]["step_s_median"]
    if "engine_mp" in result:
        result["parallel_gain_wall"] = result["engine"]["step_s_median"] / result["engine_mp"]["step_s_median"]
        if vs_comlrl:
            best = min(result["comlrl"]["step_s_median"], result["comlrl_cores"]["step_s_median"])
            for name in ("engine_mp", "engine_mp_batched"):
                result[f"speedup_{name}_wall"] = best / result[name]["step_s_median"]
    return result


def format_report(result: dict[str, Any]) -> str:
    """A plain-text table of the benchmark result."""
    w = result["workload"]
    lines = [
        f"workload: {w['num_agents']} agents, tiny-{w['arch']}-{w['size']}, K={w['num_generations']}, "
        f"{w['max_new_tokens']} new tokens, {w['items_per_update']} items per step, "
        f"{w['steps']} timed steps after {w['warmup_steps']} warm-up, x{result.get('rounds', 1)} rounds, "
        f"{w['threads']} thread(s)" + ("" if w.get("fast_decode", True) else ", fast token step off"),
        f"{'':15}{'CPU s/step':>11}{'wall s/step':>12}{'generate s':>11}{'update s':>9}{'peak MiB':>9}"
        "   (medians; phases are wall-clock means)",
    ]
    for name in ("engine", "engine_batched", "bare", "comlrl", "engine_mp", "engine_mp_batched", "comlrl_cores"):
        part = result.get(name)
        if part is None:
            continue
        phases = part.get("phases", {})
        cells = [f"{phases[k]:.3f}" if k in phases else "-" for k in ("generate_s", "update_s")]
        lines.append(
            f"{name:15}{part['step_cpu_s_median']:>11.3f}{part['step_s_median']:>12.3f}"
            f"{cells[0]:>11}{cells[1]:>9}{part['peak_mem_mb']:>9.0f}"
        )
    for name in ("engine", "engine_batched"):
        text = (
            f"{name}: {result[name]['tokens_per_s']:.0f} generated tokens/s; overhead over bare model calls "
            f"{result[f'overhead_{name}']:.2f}x CPU ({result[f'overhead_{name}_wall']:.2f}x wall)"
        )
        if f"speedup_{name}" in result:
            text += (
                f"; {result[f'speedup_{name}']:.2f}x faster than CoMLRL "
                f"({result[f'speedup_{name}_wall']:.2f}x wall)"
            )
        lines.append(text)
    if "engine_mp" in result:
        cores = result["cores"]
        text = (
            f"on {cores} cores (wall clock): engine_mp (agents in parallel, parallel_training='mp' on CPU) "
            f"{result['engine_mp']['step_s_median']:.3f} s/step, {result['parallel_gain_wall']:.2f}x the one-core "
            f"engine; engine_mp_batched {result['engine_mp_batched']['step_s_median']:.3f} s/step"
        )
        if "speedup_engine_mp_wall" in result:
            text += (
                f"; CoMLRL with {cores} threads {result['comlrl_cores']['step_s_median']:.3f} s/step "
                f"(1 thread {result['comlrl']['step_s_median']:.3f}); against CoMLRL's better of the two: "
                f"engine_mp {result['speedup_engine_mp_wall']:.2f}x, "
                f"engine_mp_batched {result['speedup_engine_mp_batched_wall']:.2f}x faster"
            )
        lines.append(text)
    for dec in (result.get("decoders") or {}).values():
        lines.append(
            f"sampling call ({dec['prompts']} prompt(s) x K): lean decoder {dec['lean_cpu_s']:.3f} CPU s "
            f"(through the model's forward {dec['lean_modules_cpu_s']:.3f}), "
            f"generate {dec['generate_cpu_s']:.3f} CPU s ({dec['lean_speedup']:.2f}x)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.training", description="CoopLab training benchmark (see docs/benchmarks.md)"
    )
    parser.add_argument("--vs-comlrl", action="store_true", help="also run CoMLRL 1.4.3 on the same workload")
    parser.add_argument("--steps", type=int, default=Workload.steps, help="timed steps")
    parser.add_argument("--size", default=Workload.size, help="tiny model size: xs, s or m")
    parser.add_argument("--threads", type=int, default=Workload.threads, help="torch CPU threads per process")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved repetitions of every part")
    parser.add_argument("--cores", type=int, default=min(2, os.cpu_count() or 1),
                        help="also compare on this many cores by wall clock (engine agents in parallel vs "
                             "CoMLRL with as many threads); 1 skips it")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-fast-decode", action="store_true",
                        help="engine parts sample through the model's forward (no fast token step)")
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:  # a subprocess worker: run one part, print its JSON
        w = Workload(**json.loads(args.workload)) if args.workload else Workload()
        print(json.dumps(PARTS[args.part](w)))
        return 0
    w = replace(Workload(), steps=args.steps, size=args.size, threads=args.threads,
                fast_decode=not args.no_fast_decode)
    try:
        result = run_bench(w, vs_comlrl=args.vs_comlrl, rounds=args.rounds, cores=max(1, args.cores))
    except ComlrlMissingError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0
