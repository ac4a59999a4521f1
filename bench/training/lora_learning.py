"""LoRA (or sampling from bfloat16 copies) against full fine-tuning on a learning task, over several
seeds: how much of the learning is kept.

Each run trains the two-agent team of a run config (default: the quick start,
``engine/examples/quickstart.yaml``: two tiny Llamas learn to split the alphabet) for ``--steps``
steps, once per arm of ``--arms`` for every seed: ``full`` (every weight trained), ``lora`` (a LoRA
adapter per agent, ``--lora-rank`` on ``--lora-targets``, learning rate ``--lora-lr``: adapters
usually want a larger one) and ``rollout_bf16`` (``full`` sampling from bfloat16 copies of the
weights, ``rollout_dtype: bfloat16``).
Reported per arm: the team reward (``train/reward_mean``) of the first and last ``--window`` steps,
averaged over seeds, their difference (the gain), each seed's gain, and the seconds per step.
Learning curves vary a lot between seeds on tiny models (docs/machine facts): judge the means.

``python -m bench.training.lora_learning --seeds 0,1,2 --steps 60 [--arms full,lora,rollout_bf16]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from engine.examples import example_path

QUICKSTART = example_path("quickstart")
ARMS = {"full": {"lora": False}, "lora": {"lora": True}, "rollout_bf16": {"lora": False, "rollout_dtype": "bfloat16"}}


def arm_config(base: dict[str, Any], *, lora: bool, seed: int, steps: int, rank: int, targets: list[str],
               lora_lr: float, rollout_dtype: str | None = None) -> dict[str, Any]:
    """The run config of one arm and seed: no evaluation, no checkpoints, ``steps`` steps."""
    config = json.loads(json.dumps(base))
    config["trainer"].update(seed=seed, max_steps=steps, eval_interval=0, checkpoint_interval=0,
                             transcripts_per_step=0)
    if rollout_dtype is not None:
        config["trainer"]["rollout_dtype"] = rollout_dtype
    if lora:
        for agent in config["agents"]:
            agent.update(lora_rank=rank, lora_alpha=float(2 * rank), lora_target_modules=targets,
                         learning_rate=lora_lr)
    return config


def run_arm(config: dict[str, Any]) -> dict[str, Any]:
    """Train one run config in memory; its per-step team rewards and seconds per step."""
    from engine.build.run import build_trainer
    from engine.schema.run_config import parse_run_config
    from engine.sinks import MemorySink

    trainer = build_trainer(parse_run_config(config), output_dir=None)
    sink = MemorySink()
    start = time.perf_counter()
    trainer.train(sink=sink)
    seconds = time.perf_counter() - start
    rewards = [s.metrics["train/reward_mean"] for s in sink.steps]
    return {"rewards": rewards, "s_per_step": seconds / max(1, len(rewards))}


def compare(base: dict[str, Any], seeds: list[int], *, steps: int, window: int, rank: int, targets: list[str],
            lora_lr: float, arms: tuple[str, ...] = ("full", "lora")) -> dict[str, Any]:
    """Every arm for every seed (interleaved, so load changes hit all) and their summaries."""
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ValueError(f"unknown arms {unknown}; choose from {sorted(ARMS)}")
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for seed in seeds:
        for arm in runs:
            config = arm_config(base, seed=seed, steps=steps, rank=rank, targets=targets, lora_lr=lora_lr,
                                **ARMS[arm])
            runs[arm].append(run_arm(config))
    result: dict[str, Any] = {"seeds": seeds, "steps": steps, "window": window, "lora_rank": rank,
                              "lora_targets": targets, "lora_lr": lora_lr, "arms": list(arms)}
    for arm, arm_runs in runs.items():
        first = [statistics.fmean(r["rewards"][:window]) for r in arm_runs]
        last = [statistics.fmean(r["rewards"][-window:]) for r in arm_runs]
        result[arm] = {"first": statistics.fmean(first), "last": statistics.fmean(last),
                       "gain": statistics.fmean(b - a for a, b in zip(first, last, strict=True)),
                       "gain_per_seed": [b - a for a, b in zip(first, last, strict=True)],
                       "s_per_step": statistics.fmean(r["s_per_step"] for r in arm_runs),
                       "rewards": [r["rewards"] for r in arm_runs]}
    return result


def format_learning_report(result: dict[str, Any]) -> str:
    lora = (f"; LoRA rank {result['lora_rank']} on {result['lora_targets']}, lr {result['lora_lr']}"
            if "lora" in result["arms"] else "")
    lines = [f"{' vs '.join(result['arms'])}: seeds {result['seeds']}, {result['steps']} steps, team reward averaged "
             f"over the first/last {result['window']} steps{lora}",
             f"{'arm':14}{'first':>8}{'last':>8}{'gain':>8}{'s/step':>8}   gain per seed"]
    for arm in result["arms"]:
        r = result[arm]
        lines.append(f"{arm:14}{r['first']:>8.3f}{r['last']:>8.3f}{r['gain']:>8.3f}{r['s_per_step']:>8.2f}   "
                     + ", ".join(f"{g:+.3f}" for g in r["gain_per_seed"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from engine.schema.safe_yaml import load_yaml_file

    parser = argparse.ArgumentParser(prog="python -m bench.training.lora_learning", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(QUICKSTART), help="run config with a two-agent team")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--window", type=int, default=10, help="steps averaged at the start and at the end")
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--lora-targets", default="all-linear", help="comma-separated module names or all-linear")
    parser.add_argument("--lora-lr", type=float, default=1e-2)
    parser.add_argument("--arms", default="full,lora", help=f"comma-separated arms of {sorted(ARMS)}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    base = load_yaml_file(args.config)
    result = compare(base, [int(s) for s in args.seeds.split(",")], steps=args.steps, window=args.window,
                     rank=args.lora_rank, targets=[t.strip() for t in args.lora_targets.split(",")],
                     lora_lr=args.lora_lr, arms=tuple(a.strip() for a in args.arms.split(",")))
    print(json.dumps(result) if args.json else format_learning_report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
