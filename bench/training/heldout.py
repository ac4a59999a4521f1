"""Held-out learning of a real team: train, then evaluate step 0, the best and the last checkpoint on
items no training step saw, and ask which agent mattered.

Per seed: the team of ``--model`` (default two SmolLM2-135M-Instruct agents) trains on ``--task``
(the quick start, or CoMLRL's TLDR writing task on the shipped passages: :mod:`bench.training.heldout_tasks`;
``--task-params`` may change it) for ``--steps`` MAGRPO steps, evaluating every
``--eval-interval`` steps on the first ``--select-items`` held-out items to keep the best checkpoint
(``best_checkpoint_metric: eval/reward_mean``). Then, with ``cooplab eval``'s own code
(:func:`engine.evaluation.evaluate.evaluate_run`), the base models (step 0), the best and the last checkpoint
are evaluated on all ``--eval-items`` held-out items with ``--samples`` answers each and one fixed
seed, and :func:`engine.evaluation.team_analysis.analyze_team` runs on the last checkpoint.

The best checkpoint is chosen on held-out items that the final evaluation also uses, so its row is
optimistic; the last checkpoint's row is the unbiased one. The table gives each metric as the mean
over seeds ± the standard error over seeds, and each seed's gain with its own standard error over
items, with the minutes of wall time and of CPU (this process, all threads) per seed.

``python -m bench.training.heldout --seeds 0,1,2 --steps 80 [--task tldr] [--model builtin:smollm2-135m] [--json]``
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.training.heldout_tasks import EVAL_ITEMS, NEW_TOKENS, TASKS, task_spec

METRIC = "eval/reward_mean"


def run_config(*, model: str, seed: int, steps: int, lr: float, samples: int, new_tokens: int, eval_interval: int,
               select_items: int, task: dict[str, Any]) -> dict[str, Any]:
    """The run config of one seed: two agents of ``model`` on ``task`` (a run config's task section,
    :func:`bench.training.heldout_tasks.task_spec`) with held-out items."""
    return {
        "name": f"heldout-seed{seed}",
        "agents": [{"name": "first", "model": model}, {"name": "second", "model": model}],
        "task": task,
        "trainer": {"algorithm": "magrpo", "max_steps": steps, "num_generations": samples,
                    "agent_learning_rate": lr, "max_new_tokens": new_tokens, "temperature": 1.0, "top_p": 1.0,
                    "top_k": 50, "rollout_buffer_size": 1, "eval_interval": eval_interval,
                    "eval_num_samples": select_items, "eval_samples_per_item": samples,
                    "best_checkpoint_metric": METRIC, "checkpoint_interval": 0, "checkpoint_total_limit": 1,
                    "transcripts_per_step": 0, "logging_steps": 10, "seed": seed},
    }


def one_seed(config: dict[str, Any], *, samples: int, eval_seed: int, out: Path, analysis: bool = True) -> dict[str, Any]:
    """Train one seed into ``out`` and evaluate step 0, best and last (and, with ``analysis``, the team
    analysis of the last checkpoint); its rows and timings."""
    from engine.build.run import run_training
    from engine.evaluation.evaluate import evaluate_run, find_checkpoint
    from engine.evaluation.team_analysis import analyze_team
    from engine.schema.run_config import parse_run_config
    from engine.sinks import NullSink

    run = parse_run_config(config)
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_training(run, output_dir=out, sink=NullSink())
    train_wall, train_cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows: dict[str, Any] = {}
    for label, checkpoint in (("step 0", None), ("best", "best"), ("last", "last")):
        report = evaluate_run(run, checkpoint=find_checkpoint(out, checkpoint) if checkpoint else None,
                              samples=samples, seed=eval_seed)
        rows[label] = {"step": report.checkpoint_step or 0, "value": report.metrics[METRIC],
                       "se": report.standard_errors[METRIC], "items": report.items}
    team = analyze_team(run, find_checkpoint(out, "last"), samples=samples, seed=eval_seed) if analysis else None
    return {"status": result.status, "rows": rows, "analysis": team.to_json() if team else None,
            "table": team.table() if team else "",
            "train_wall_min": train_wall / 60, "train_cpu_min": train_cpu / 60,
            "total_wall_min": (time.perf_counter() - wall) / 60, "total_cpu_min": (time.process_time() - cpu) / 60}


def summarize(seeds: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per row: the mean over seeds and its standard error; per seed: the last checkpoint's gain over
    step 0 with the standard error of that difference over items."""
    summary: dict[str, Any] = {}
    for label in ("step 0", "best", "last"):
        values = [s["rows"][label]["value"] for s in seeds.values()]
        se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        summary[label] = {"mean": statistics.fmean(values), "se_over_seeds": se}
    summary["gains"] = {seed: {"gain": s["rows"]["last"]["value"] - s["rows"]["step 0"]["value"],
                               "se": math.hypot(s["rows"]["last"]["se"], s["rows"]["step 0"]["se"])}
                        for seed, s in seeds.items()}
    return summary


def markdown(seeds: dict[int, dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = ["| seed | step 0 | best (step) | last | last - step 0 | minutes (wall / CPU) |", "|---|---|---|---|---|---|"]
    for seed, s in seeds.items():
        r = s["rows"]
        gain = summary["gains"][seed]
        lines.append(f"| {seed} | {r['step 0']['value']:.3f} ± {r['step 0']['se']:.3f} | {r['best']['value']:.3f} "
                     f"± {r['best']['se']:.3f} ({r['best']['step']}) | {r['last']['value']:.3f} ± {r['last']['se']:.3f} "
                     f"| {gain['gain']:+.3f} ± {gain['se']:.3f} | {s['total_wall_min']:.1f} / {s['total_cpu_min']:.1f} |")
    lines.append(f"| mean ± s.e. over seeds | {summary['step 0']['mean']:.3f} ± {summary['step 0']['se_over_seeds']:.3f} "
                 f"| {summary['best']['mean']:.3f} ± {summary['best']['se_over_seeds']:.3f} | "
                 f"{summary['last']['mean']:.3f} ± {summary['last']['se_over_seeds']:.3f} | | |")
    return "\n".join(lines)


def merged(paths: list[str]) -> str:
    """The table of ``--json`` reports run one seed per process (in parallel)."""
    seeds = {int(k): s for path in paths for k, s in json.loads(Path(path).read_text())["seeds"].items()}
    return markdown(seeds, summarize(seeds))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="builtin:smollm2-135m")
    parser.add_argument("--task", default="quickstart", choices=TASKS)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--lr", type=float, default=2e-6)
    parser.add_argument("--samples", type=int, default=4, help="K: answers per item, in training and evaluation")
    parser.add_argument("--new-tokens", type=int, default=None, help="default: 16 (quickstart), 48 (tldr)")
    parser.add_argument("--eval-interval", type=int, default=20)
    parser.add_argument("--select-items", type=int, default=4, help="held-out items the best checkpoint is chosen on")
    parser.add_argument("--eval-items", type=int, default=None,
                        help="held-out items of the final evaluation; default: 12 (quickstart), 8 of the 20 passages (tldr)")
    parser.add_argument("--eval-seed", type=int, default=1234)
    parser.add_argument("--task-params", default="{}", help="JSON: the task's other params")
    parser.add_argument("--analysis-seeds", default=None,
                        help="seeds whose last checkpoint gets the team analysis (default: all; it costs 5 evaluations)")
    parser.add_argument("--out", default=None, help="keep the run folders here (default: a temporary folder)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--merge", nargs="+", metavar="REPORT", help="print the table of earlier --json reports")
    args = parser.parse_args(argv)
    if args.merge:
        print(merged(args.merge), flush=True)
        return {}
    new_tokens = NEW_TOKENS[args.task] if args.new_tokens is None else args.new_tokens
    eval_items = EVAL_ITEMS[args.task] if args.eval_items is None else args.eval_items
    seeds: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out or tmp)
        task = task_spec(args.task, eval_items=eval_items, task_params=json.loads(args.task_params),
                         data_dir=root / "data")
        for seed in [int(s) for s in args.seeds.split(",")]:
            config = run_config(model=args.model, seed=seed, steps=args.steps, lr=args.lr, samples=args.samples,
                                new_tokens=new_tokens, eval_interval=args.eval_interval,
                                select_items=args.select_items, task=task)
            analysis = args.analysis_seeds is None or str(seed) in args.analysis_seeds.split(",")
            seeds[seed] = one_seed(config, samples=args.samples, eval_seed=args.eval_seed, out=root / f"seed-{seed}",
                                   analysis=analysis)
            if not args.json:
                print(f"seed {seed}: {json.dumps(seeds[seed]['rows'])}", flush=True)
                print(seeds[seed]["table"], flush=True)
    summary = summarize(seeds)
    report = {"task": args.task, "model": args.model, "steps": args.steps, "lr": args.lr, "samples": args.samples,
              "new_tokens": new_tokens, "eval_items": eval_items,
              "seeds": {str(k): {k2: v for k2, v in s.items() if k2 != "table"} for k, s in seeds.items()},
              "summary": summary}
    print(json.dumps(report, sort_keys=True) if args.json else markdown(seeds, summary), flush=True)
    return report


if __name__ == "__main__":
    main()
