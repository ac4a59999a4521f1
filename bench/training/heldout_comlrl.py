"""CoMLRL 1.4.3 on the held-out learning workload of :mod:`bench.training.heldout`, measured the same way.

CoMLRL's ``MAGRPOTrainer`` trains the same two models (loaded by CoopLab's loader, so the weights
match) on the same task's training items (``--task``: the quick start or TLDR,
:mod:`bench.training.heldout_tasks`), prompts and team reward, with the same K, lengths, sampling and
learning rate for ``--epochs`` passes over the training items (CoMLRL counts epochs, not steps: 4
epochs of the quick start's 16 topics are 64 updates of one item each). Its saved models are then evaluated by CoopLab's own evaluation
(:func:`engine.evaluation.evaluate.evaluate_run` with ``models=``) on the same held-out items, answers per item
and seed as the CoopLab rows, next to the untrained models' evaluation. CoMLRL is an optional
benchmark extra (``pip install --no-deps comlrl==1.4.3 && pip install wandb openai``).

``WANDB_MODE=disabled python -m bench.training.heldout_comlrl --seeds 0 [--task tldr] [--epochs 4] [--json]``
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.training.heldout import METRIC, run_config
from bench.training.heldout_tasks import EVAL_ITEMS, NEW_TOKENS, TASKS, comlrl_reward, task_spec
from bench.training.vs_comlrl import import_comlrl


def train_with_comlrl(*, model: str, seed: int, epochs: int, lr: float, samples: int, new_tokens: int,
                      task: dict[str, Any], out: Path) -> tuple[list[Path], int]:
    """Train the team with CoMLRL on ``task`` (a run config's task section) and save each agent as a
    model folder; the folders and the number of updates."""
    import numpy as np
    import torch

    from engine.models import load_agent
    from engine.tasks import build_task

    config_cls, trainer_cls = import_comlrl()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    agents = [load_agent(model, device="cpu") for _ in range(2)]
    built = build_task(task["name"], task["params"], 2)
    reward = comlrl_reward(task["name"], task["params"])

    config = config_cls(num_train_epochs=epochs, agent_learning_rate=lr, num_generations=samples,
                        max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, top_k=50, num_turns=1,
                        rollout_buffer_size=1, eval_interval=0, logging_steps=1000)
    trainer = trainer_cls(agents=[m for m, _ in agents], tokenizer=[t for _, t in agents],
                          train_dataset=built.train_dataset, reward_func=reward, formatters=built.formatters,
                          args=config, wandb_config=None)
    trainer.verbose = False
    trainer.train()
    folders = []
    for i, (m, t) in enumerate(agents):
        folder = out / f"agent_{i}"
        m.save_pretrained(folder)
        t.save_pretrained(folder)
        folders.append(folder)
    return folders, epochs * len(built.train_dataset)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="builtin:smollm2-135m")
    parser.add_argument("--task", default="quickstart", choices=TASKS)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=None, help="default: 16 (quickstart), 48 (tldr)")
    parser.add_argument("--eval-items", type=int, default=None, help="default: 12 (quickstart), 8 (tldr)")
    parser.add_argument("--eval-seed", type=int, default=1234)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from engine.evaluation.evaluate import evaluate_run
    from engine.schema.run_config import parse_run_config

    new_tokens = NEW_TOKENS[args.task] if args.new_tokens is None else args.new_tokens
    eval_items = EVAL_ITEMS[args.task] if args.eval_items is None else args.eval_items
    results: dict[str, Any] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            task = task_spec(args.task, eval_items=eval_items, task_params={}, data_dir=Path(tmp) / "data")
            config = parse_run_config(run_config(model=args.model, seed=seed, steps=1, lr=args.lr,
                                                 samples=args.samples, new_tokens=new_tokens, eval_interval=1,
                                                 select_items=1, task=task))
            wall, cpu = time.perf_counter(), time.process_time()
            folders, updates = train_with_comlrl(model=args.model, seed=seed, epochs=args.epochs, lr=args.lr,
                                                 samples=args.samples, new_tokens=new_tokens, task=task,
                                                 out=Path(tmp))
            train_wall, train_cpu = time.perf_counter() - wall, time.process_time() - cpu
            base = evaluate_run(config, samples=args.samples, seed=args.eval_seed)
            trained = evaluate_run(config, models=folders, samples=args.samples, seed=args.eval_seed)
        results[str(seed)] = {
            "step 0": {"value": base.metrics[METRIC], "se": base.standard_errors[METRIC]},
            "trained": {"value": trained.metrics[METRIC], "se": trained.standard_errors[METRIC],
                        "updates": updates},
            "train_wall_min": train_wall / 60, "train_cpu_min": train_cpu / 60,
            "total_wall_min": (time.perf_counter() - wall) / 60, "total_cpu_min": (time.process_time() - cpu) / 60}
        if not args.json:
            print(f"seed {seed}: {json.dumps(results[str(seed)])}", flush=True)
    report = {"trainer": "comlrl 1.4.3 MAGRPO", "task": args.task, "model": args.model, "epochs": args.epochs,
              "lr": args.lr, "samples": args.samples, "new_tokens": new_tokens, "seeds": results}
    print(json.dumps(report, sort_keys=True), flush=True)
    return report


if __name__ == "__main__":
    main()
