"""Credit assignment and TIS, measured: which estimator teaches a team more, on held-out items.

Two tables. **Learning**: every estimator of ``--estimators`` (``group``: MAGRPO's sibling baseline,
the default; ``group_per_agent``: the same with ``per_agent_normalization``; ``counterfactual``;
``turn_group``, on multi-turn tasks only: with one turn it is the group baseline, and the row says
so) trains every task of ``--tasks`` once per seed. **TIS**: the ``group`` estimator trained with
float32 sampling, and with sampling from bfloat16 copies (``rollout_dtype: bfloat16``) with
``rollout_correction: tis`` and ``none``, on ``--tis-tasks`` (an empty value leaves the table out).

The tasks (:mod:`bench.training.credit_runs`, :mod:`bench.training.credit_tasks`): ``quickstart``
(the engine's quick start, 40 steps), ``noisy_parts`` (an additive team reward whose halves belong to
one agent each, with Gaussian noise on each half, 60 steps) and ``feedback`` (the same reward without
noise over two turns, each agent shown both parts' scores before its second answer, K=4, 10 steps).
Two ``builtin:tiny-llama`` agents each, one torch thread.

Every run is measured outside the trainer with ``cooplab eval``'s code on the task's held-out items
(``eval/reward_mean``, ``--samples`` joint answers per item, seed 1234, the noiseless reward, float32
sampling), before and after training. Reported per task and arm, as mean ± standard error over the
seeds: the held-out metric before and after, the gain, the team reward of the last fifth of the
training steps, the wall seconds of the training, and the extra reward calls the run logged
(``perf/credit_reward_calls``, summed over its steps); for TIS also the logged sampler mismatch.
Runs are interleaved (seed, then task, then arm) so a change of the machine's load hits every arm;
an arm whose config equals another's (the float32 TIS arm is the ``group`` estimator) runs once.

``python -m bench.training.credit [--tasks quickstart,noisy_parts,feedback] [--estimators ...]
[--seeds 0,1,2] [--steps N] [--tis-tasks quickstart,noisy_parts,feedback] [--json]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Any

from bench.training.credit_report import learning_table, paired_difference, summarize_cell, tis_table
from bench.training.credit_runs import (
    EVAL_SEED,
    FLOAT32_SAMPLING,
    TASKS,
    measure_before,
    run_config,
    train_and_measure,
)

# every estimator samples from the trained float32 weights (rollout_dtype pinned: its default may differ)
ESTIMATORS: dict[str, dict[str, Any]] = {
    "group": {"credit_assignment": "group", **FLOAT32_SAMPLING},
    "group_per_agent": {"credit_assignment": "group", "per_agent_normalization": True, **FLOAT32_SAMPLING},
    "counterfactual": {"credit_assignment": "counterfactual", **FLOAT32_SAMPLING},
    "turn_group": {"credit_assignment": "turn_group", **FLOAT32_SAMPLING},
}
LABELS = {"group": "group", "group_per_agent": "group + per-agent normalisation",
          "counterfactual": "counterfactual", "turn_group": "turn_group"}
TIS_ARMS: dict[str, dict[str, Any]] = {
    "float32": ESTIMATORS["group"],
    "bf16_tis": {"credit_assignment": "group", "rollout_dtype": "bfloat16", "rollout_correction": "tis"},
    "bf16_none": {"credit_assignment": "group", "rollout_dtype": "bfloat16", "rollout_correction": "none"},
}
TIS_LABELS = {"float32": ("float32", "-"), "bf16_tis": ("bfloat16", "tis (cap 2.0)"), "bf16_none": ("bfloat16", "none")}
DEFAULT_TASKS = ("quickstart", "noisy_parts", "feedback")
DEFAULT_TIS_TASKS = DEFAULT_TASKS


def applies(estimator: str, task: str) -> bool:
    """Whether ``estimator`` differs from ``group`` on ``task``: turn_group needs more than one turn."""
    return estimator != "turn_group" or TASKS[task].num_turns > 1


def _names(text: str, known: dict[str, Any] | tuple[str, ...], flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return names


def plan(tasks: list[str], estimators: list[str], tis_tasks: list[str], tis_arms: list[str],
         seeds: list[int], steps: int | None) -> list[tuple[str, str, str, int, dict[str, Any]]]:
    """Every run as ``(table, task, arm, seed, run config)``, seed-major so load changes hit every arm."""
    runs = []
    for seed in seeds:
        for task in dict.fromkeys(tasks + tis_tasks):
            if task in tasks:
                runs += [("learning", task, e, seed, run_config(task, seed, steps=steps, arm=ESTIMATORS[e]))
                         for e in estimators if applies(e, task)]
            if task in tis_tasks:
                runs += [("tis", task, a, seed, run_config(task, seed, steps=steps, arm=TIS_ARMS[a])) for a in tis_arms]
    return runs


def _cell(by_arm: dict[str, list[dict[str, Any]]], arm: str, reference: str) -> dict[str, Any]:
    """An arm's summary, with its paired difference to ``reference`` when that arm ran too."""
    cell = summarize_cell(by_arm[arm])
    if arm != reference and reference in by_arm:
        cell["vs_reference"] = paired_difference(by_arm[arm], by_arm[reference])
    return cell


def compare(tasks: list[str], estimators: list[str], seeds: list[int], *, steps: int | None = None,
            tis_tasks: tuple[str, ...] | list[str] = (), tis_arms: tuple[str, ...] | list[str] = tuple(TIS_ARMS), samples: int = 8,
            progress: Any = None) -> dict[str, Any]:
    """Run the plan and summarise it: per table, task and arm the per-seed records and their summary."""
    import torch

    torch.set_num_threads(1)
    tis_tasks = list(tis_tasks)
    tis_arms = list(tis_arms) if tis_tasks else []
    done: dict[str, dict[str, Any]] = {}  # one run per distinct config
    before: dict[tuple[str, int], dict[str, Any]] = {}
    records: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {"learning": {}, "tis": {}}
    for table, task, arm, seed, config in plan(tasks, estimators, tis_tasks, tis_arms, seeds, steps):
        if (task, seed) not in before:
            before[(task, seed)] = measure_before(config, samples=samples)
        key = json.dumps(config, sort_keys=True)
        if key not in done:
            done[key] = train_and_measure(config, samples=samples).to_json()
        record = {"seed": seed, "before": before[(task, seed)], **done[key]}
        records[table].setdefault(task, {}).setdefault(arm, []).append(record)
        if progress is not None:
            progress(f"{table:8} {task:12} {arm:16} seed {seed}: held-out {record['before']['value']:.3f} -> "
                     f"{record['after']['value']:.3f}, last fifth {record['last_fifth']:.3f}, "
                     f"{record['wall_s']:.1f} s, sums {record['sums']}")
    learning = {task: {e: (_cell(records["learning"][task], e, "group") if applies(e, task) else None)
                       for e in estimators} for task in tasks}
    tis = {task: {a: _cell(records["tis"][task], a, "float32") for a in tis_arms} for task in tis_tasks}
    return {"date": datetime.date.today().isoformat(), "seeds": seeds, "samples": samples, "eval_seed": EVAL_SEED,
            "steps": {t: steps or TASKS[t].steps for t in dict.fromkeys(tasks + tis_tasks)},
            "learning": learning, "tis": tis, "records": records}


def _ordered(cells: dict[str, dict[str, Any]], arms: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``cells`` with tasks in ``TASKS``' order and arms in ``arms``' (JSON may have sorted them)."""
    return {t: {a: cells[t][a] for a in arms if a in cells[t]} for t in TASKS if t in cells}


def markdown(result: dict[str, Any]) -> str:
    parts = [f"Credit assignment ({result['date']}; seeds {result['seeds']}, steps {result['steps']}, "
             f"{result['samples']} held-out answers per item), mean ± s.e. over seeds:", "",
             learning_table(_ordered(result["learning"], ESTIMATORS), LABELS)]
    if result["tis"]:
        parts += ["", "Sampling from bfloat16 copies with and without TIS (the group estimator):", "",
                  tis_table(_ordered(result["tis"], TIS_ARMS), TIS_LABELS)]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.training.credit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help=f"comma-separated of {', '.join(TASKS)}")
    parser.add_argument("--estimators", default=",".join(ESTIMATORS),
                        help=f"comma-separated of {', '.join(ESTIMATORS)}")
    parser.add_argument("--tis-tasks", default=",".join(DEFAULT_TIS_TASKS),
                        help="tasks of the TIS table (empty: no TIS table)")
    parser.add_argument("--tis-arms", default=",".join(TIS_ARMS), help=f"comma-separated of {', '.join(TIS_ARMS)}")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=None, help="training steps of every task (default: each task's)")
    parser.add_argument("--samples", type=int, default=8, help="joint answers per held-out item")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the tables")
    args = parser.parse_args(argv)
    result = compare(_names(args.tasks, TASKS, "--tasks"), _names(args.estimators, ESTIMATORS, "--estimators"),
                     [int(s) for s in args.seeds.split(",")], steps=args.steps,
                     tis_tasks=_names(args.tis_tasks, TASKS, "--tis-tasks"),
                     tis_arms=_names(args.tis_arms, TIS_ARMS, "--tis-arms"), samples=args.samples,
                     progress=None if args.json else (lambda line: print(line, file=sys.stderr, flush=True)))
    print(json.dumps(result, sort_keys=True) if args.json else markdown(result), flush=True)
    return result


if __name__ == "__main__":
    main()
