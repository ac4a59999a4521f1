"""A CoMLRL script with its imports changed: ``python -m bench.training.script_ratio --cores 1 2 --runs 3``.

The user script (:func:`bench.training.script_ratio_user.train_team`) trains two agents for one
step, importing ``MAGRPOConfig``/``MAGRPOTrainer`` from ``comlrl.trainers.reinforce`` or from
``engine``; nothing else differs. Each run is a fresh process pinned with ``taskset`` to 1 or N
cores (torch threads = cores), and the parts alternate within every run: CoopLab with its defaults,
CoMLRL 1.4.3, and CoopLab with ``rollout_dtype: auto`` (bfloat16 sampling copies where the CPU has
bfloat16 instructions, with truncated importance sampling).

Per run: wall and CPU seconds of ``trainer.train()`` (model loading and the constructor excluded),
generated tokens, seconds per 1k generated tokens, peak memory and the machine's 1-minute load.
EOS is unreachable for both trainers (:func:`bench.training.workload.never_eos`), so every
completion is exactly ``max_new_tokens`` long: generated tokens = 2 agents x K x max_new_tokens;
the reward function's re-encoded count of the completions is shown next to it as a check. The
ratio is CoMLRL's median seconds per 1k tokens over CoopLab's.

CoMLRL is a benchmark-only extra: installed in this environment, or in a folder of its own passed
with ``--comlrl-site`` (``COMLRL_SITE``). Without it the CoMLRL part is reported as missing, with
the install command, and CoopLab's parts still run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.training.vs_comlrl import COMLRL_INSTALL


@dataclass(frozen=True)
class Part:
    """One configuration of the user script: its label, trainer package and extra config fields."""

    label: str
    package: str
    settings: dict[str, Any]


PARTS = {
    "cooplab": Part("CoopLab (defaults)", "engine", {}),
    "comlrl": Part("CoMLRL 1.4.3", "comlrl.trainers.reinforce", {}),
    "cooplab_auto": Part("CoopLab, rollout_dtype: auto", "engine", {"rollout_dtype": "auto"}),
}
COMLRL_SITE_INSTALL = ("pip install --target DIR --no-deps comlrl==1.4.3 && pip install --target DIR wandb openai, "
                       "then --comlrl-site DIR")


def comlrl_missing(site: str | None) -> str | None:
    """None when CoMLRL 1.4.3 can be imported (from ``site`` when given, else from this environment);
    otherwise the line that says it is missing and how to install it."""
    if site:
        if (Path(site) / "comlrl" / "trainers" / "reinforce" / "__init__.py").is_file():
            return None
        where = f"not in {site}"
    else:
        if importlib.util.find_spec("comlrl") is not None:
            return None
        where = "not installed"
    return f"CoMLRL 1.4.3 is {where}: the CoMLRL part is missing. Install it: {COMLRL_INSTALL} (or {COMLRL_SITE_INSTALL})"


def model_folder(source: str) -> str:
    """The folder a user script loads with ``from_pretrained``: ``builtin:smollm2-135m`` (its plain
    cached copy) or a model folder."""
    if source == "builtin:smollm2-135m":
        from engine.models.smollm2 import smollm2_folder

        return str(smollm2_folder())
    if not (Path(source) / "config.json").is_file():
        raise ValueError(f"--model {source!r}: expected builtin:smollm2-135m or a model folder with a config.json")
    return source


def pinned_cpus(cores: int) -> list[int]:
    """The first ``cores`` CPUs this process may run on (a run is pinned to them)."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores < 1 or cores > len(allowed):
        raise ValueError(f"--cores {cores}: this process may use {len(allowed)} CPU(s) ({allowed})")
    return allowed[:cores]


def run_once(part: str, folder: str, cores: int, *, comlrl_site: str | None = None, num_generations: int = 4,
             max_new_tokens: int = 48) -> dict[str, Any]:
    """One run of the user script for ``part`` in a fresh process pinned to ``cores`` CPUs."""
    taskset = shutil.which("taskset")
    if taskset is None:
        raise RuntimeError("the script ratio pins each run with taskset, which is missing: install util-linux")
    spec = PARTS[part]
    cpus = pinned_cpus(cores)
    env = dict(os.environ, OMP_NUM_THREADS=str(cores), MKL_NUM_THREADS=str(cores), WANDB_MODE="disabled",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if spec.package.startswith("comlrl") and comlrl_site:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (comlrl_site, env.get("PYTHONPATH")) if p)
    cmd = [taskset, "-c", ",".join(map(str, cpus)), sys.executable, "-m", "bench.training.script_ratio_child",
           "--package", spec.package, "--model", folder, "--cores", str(cores),
           "--num-generations", str(num_generations), "--max-new-tokens", str(max_new_tokens),
           "--settings", json.dumps(spec.settings)]
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], env=env, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"script ratio run {part!r} on {cores} core(s) failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update(part=part, cores=cores, load_1min=load,
                  sampling=[line for line in proc.stderr.splitlines() if line.startswith("sampling:")])
    tokens = result["tokens_generated"] or result["tokens_reencoded"]
    result["s_per_1k_tokens"] = 1000 * result["train_s"] / tokens
    result["s_per_1k_with_setup"] = 1000 * (result["setup_s"] + result["train_s"]) / tokens
    return result


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per core count and part: the medians of the runs' ``train_s``, ``train_cpu_s``,
    ``s_per_1k_tokens`` and ``s_per_1k_with_setup`` (the constructor's seconds added); per core
    count: CoMLRL's median seconds per 1k tokens over each CoopLab part's (``ratio_<part>``,
    ``ratio_with_setup_<part>``) and, when one core was measured, CoMLRL's better of one core and
    this many over each CoopLab part's (``ratio_best_<part>``)."""
    summary: dict[str, Any] = {}
    for cores in sorted({r["cores"] for r in runs}):
        parts: dict[str, Any] = {}
        for part in PARTS:
            mine = [r for r in runs if r["cores"] == cores and r["part"] == part]
            if mine:
                parts[part] = {key: statistics.median(r[key] for r in mine)
                               for key in ("train_s", "train_cpu_s", "s_per_1k_tokens", "s_per_1k_with_setup")}
                parts[part]["runs"] = len(mine)
        if "comlrl" in parts:
            for part in ("cooplab", "cooplab_auto"):
                if part in parts:
                    for key, name in (("s_per_1k_tokens", "ratio"), ("s_per_1k_with_setup", "ratio_with_setup")):
                        parts[f"{name}_{part}"] = parts["comlrl"][key] / parts[part][key]
        summary[cores] = parts
    one = summary.get(1, {}).get("comlrl")
    for parts in summary.values():  # CoMLRL's better of one core and this many (its threads may spin)
        if one and "comlrl" in parts:
            best = min(one["s_per_1k_tokens"], parts["comlrl"]["s_per_1k_tokens"])
            for part in ("cooplab", "cooplab_auto"):
                if part in parts:
                    parts[f"ratio_best_{part}"] = best / parts[part]["s_per_1k_tokens"]
    return summary


def run_script_ratio(source: str, *, cores: list[int], runs: int = 3, comlrl_site: str | None = None,
                     num_generations: int = 4, max_new_tokens: int = 48, progress: Any = None) -> dict[str, Any]:
    """Every run (per core count: ``runs`` rounds, the parts alternating in each) and the summary."""
    folder = model_folder(source)
    missing = comlrl_missing(comlrl_site)
    parts = [p for p in PARTS if not (p == "comlrl" and missing)]
    done: list[dict[str, Any]] = []
    for n in cores:
        for i in range(runs):
            for part in parts:
                r = run_once(part, folder, n, comlrl_site=comlrl_site, num_generations=num_generations,
                             max_new_tokens=max_new_tokens)
                r["run"] = i + 1
                done.append(r)
                if progress:
                    progress(r)
    return {"model": source, "folder": folder, "num_generations": num_generations, "max_new_tokens": max_new_tokens,
            "runs": done, "summary": summarize(done), "comlrl_missing": missing}


def load_result(path: str | Path) -> dict[str, Any]:
    """A result written with ``--json``, its summary recomputed from the runs (JSON keys are strings)."""
    result = json.loads(Path(path).read_text())
    result["summary"] = summarize(result["runs"])
    return result


def _cell(value: Any, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def format_markdown(result: dict[str, Any]) -> str:
    """The per-run table with medians, then the ratios, the sampling choice and the token check."""
    k, new = result["num_generations"], result["max_new_tokens"]
    lines = [f"Two agents of {result['model']}, plain prompts, K={k}, {new} new tokens (EOS unreachable for both: "
             f"every completion is {new} tokens), one item, one update; `trainer.train()` timed, loading excluded.",
             "",
             "| cores | part | run | load (1 min) | train s | CPU s | constructor s | generated tokens "
             "| reward calls | distinct completions (re-encoded tokens) | s per 1k tokens | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cores, parts in result["summary"].items():
        for part in PARTS:
            if part not in parts:
                continue
            for r in (r for r in result["runs"] if r["cores"] == cores and r["part"] == part):
                lines.append(f"| {cores} | {PARTS[part].label} | {r['run']} | {r['load_1min']:.1f} | {r['train_s']:.2f} "
                             f"| {r['train_cpu_s']:.2f} | {r['setup_s']:.2f} | {_cell(r['tokens_generated'], 'd')} | {r['reward_calls']} "
                             f"| {r['completions']} ({r['tokens_reencoded']}) | {r['s_per_1k_tokens']:.1f} | {r['peak_mem_mb']:.0f} |")
            m = parts[part]
            lines.append(f"| {cores} | {PARTS[part].label} | **median** | | **{m['train_s']:.2f}** | {m['train_cpu_s']:.2f} "
                         f"| | | | | **{m['s_per_1k_tokens']:.1f}** | |")
    lines += ["", "| cores | CoMLRL / CoopLab (defaults), per 1k tokens | CoMLRL / CoopLab rollout_dtype: auto "
              "| CoMLRL's better of 1 core and this many: / defaults, / auto "
              "| with the constructor timed too: defaults, auto |", "|---|---|---|---|---|"]
    for cores, parts in result["summary"].items():
        lines.append(f"| {cores} | {_ratio(parts.get('ratio_cooplab'))} | {_ratio(parts.get('ratio_cooplab_auto'))} "
                     f"| {_ratio(parts.get('ratio_best_cooplab'), bold=False)}, "
                     f"{_ratio(parts.get('ratio_best_cooplab_auto'), bold=False)} "
                     f"| {_ratio(parts.get('ratio_with_setup_cooplab'), bold=False)}, "
                     f"{_ratio(parts.get('ratio_with_setup_cooplab_auto'), bold=False)} |")
    if result["comlrl_missing"]:
        lines += ["", result["comlrl_missing"]]
    notes = next((r["sampling"] for r in result["runs"] if r["part"] == "cooplab" and r["sampling"]), [])
    if notes:
        lines += ["", "CoopLab's start-up lines (defaults):", *[f"- `{line}`" for line in notes]]
    lines += ["", "Generated tokens are exact (2 agents x K x new tokens, no EOS). The reward function re-encodes the "
              "distinct completions it is shown, as a check: special tokens are dropped when decoding and pieces "
              "re-merge, so that count only approximates the generated one; CoMLRL also cuts a completion's text at "
              "its first pad token (SmolLM2's pad is <|im_end|>, its end of turn) after generating every token, "
              "and its update still covers them all. The constructor is not timed: CoopLab's allocates the AdamW "
              "state there, CoMLRL's first optimizer step does (inside train()). With its defaults CoopLab calls the reward as often as "
              "CoMLRL (the credit probes, credit_samples, are opt-in: each adds a call per agent and probed "
              "joint action, with that agent's reply left empty)."]
    return "\n".join(lines)


def _ratio(value: float | None, *, bold: bool = True) -> str:
    if value is None:
        return "- (CoMLRL missing)"
    return f"**{value:.2f}x**" if bold else f"{value:.2f}x"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training.script_ratio", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:smollm2-135m", help="builtin:smollm2-135m or a model folder")
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2], help="core counts to pin runs to")
    parser.add_argument("--runs", type=int, default=3, help="alternated runs per part and core count")
    parser.add_argument("--comlrl-site", default=os.environ.get("COMLRL_SITE"),
                        help="a folder CoMLRL 1.4.3 was installed into with pip --target (default: $COMLRL_SITE)")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--json", help="also write every run and the summary to this file")
    parser.add_argument("--from-json", help="print the table of a result written with --json, running nothing")
    args = parser.parse_args(argv)
    if args.from_json:
        print(format_markdown(load_result(args.from_json)))
        return 0

    def progress(r: dict[str, Any]) -> None:
        print(f"{r['cores']} core(s) run {r['run']} {r['part']}: train {r['train_s']:.2f} s "
              f"({r['s_per_1k_tokens']:.1f} s per 1k tokens), load {r['load_1min']:.1f}", file=sys.stderr, flush=True)

    result = run_script_ratio(args.model, cores=args.cores, runs=args.runs, comlrl_site=args.comlrl_site,
                              num_generations=args.num_generations, max_new_tokens=args.max_new_tokens,
                              progress=progress)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print(format_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
