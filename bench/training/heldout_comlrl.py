"""CoMLRL 1.4.3 on the held-out learning workload of :mod:`bench.training.heldout`, measured the same way.

CoMLRL's ``MAGRPOTrainer`` trains the same two models (loaded by CoopLab's loader, so the weights
match) on the quick start's training items with the same K, lengths, sampling and learning rate for
``--epochs`` passes over the 16 training topics (CoMLRL counts epochs, not steps: 4 epochs are 64
updates of one item each). Its saved models are then evaluated by CoopLab's own evaluation
(:func:`engine.evaluation.evaluate.evaluate_run` with ``models=``) on the same held-out items, answers per item
and seed as the CoopLab rows, next to the untrained models' evaluation. CoMLRL is an optional
benchmark extra (``pip install --no-deps comlrl==1.4.3 && pip install wandb openai``).

``WANDB_MODE=disabled python -m bench.training.heldout_comlrl --seeds 0 [--epochs 4] [--json]``
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
from bench.training.vs_comlrl import import_comlrl


def train_with_comlrl(*, model: str, seed: int, epochs: int, lr: float, samples: int, new_tokens: int,
                      eval_items: int, out: Path) -> list[Path]:
    """Train the team with CoMLRL and save each agent as a model folder; the folders."""
    import numpy as np
    import torch

    from engine.models import load_agent
    from engine.tasks import build_task
    from engine.tasks.quickstart import QuickstartParams, team_fit

    config_cls, trainer_cls = import_comlrl()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    agents = [load_agent(model, device="cpu") for _ in range(2)]
    task = build_task("quickstart", {"eval_items": eval_items}, 2)
    first, second = QuickstartParams().first_letters, QuickstartParams().second_letters

    def reward(completions1: list[str], completions2: list[str]) -> list[float]:
        return [team_fit(a, b, first, second) for a, b in zip(completions1, completions2, strict=True)]

    config = config_cls(num_train_epochs=epochs, agent_learning_rate=lr, num_generations=samples,
                        max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, top_k=50, num_turns=1,
                        rollout_buffer_size=1, eval_interval=0, logging_steps=1000)
    trainer = trainer_cls(agents=[m for m, _ in agents], tokenizer=[t for _, t in agents],
                          train_dataset=task.train_dataset, reward_func=reward, formatters=task.formatters,
                          args=config, wandb_config=None)
    trainer.verbose = False
    trainer.train()
    folders = []
    for i, (m, t) in enumerate(agents):
        folder = out / f"agent_{i}"
        m.save_pretrained(folder)
        t.save_pretrained(folder)
        folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="builtin:smollm2-135m")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--eval-items", type=int, default=12)
    parser.add_argument("--eval-seed", type=int, default=1234)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from engine.evaluation.evaluate import evaluate_run
    from engine.schema.run_config import parse_run_config

    results: dict[str, Any] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        config = parse_run_config(run_config(model=args.model, seed=seed, steps=1, lr=args.lr, samples=args.samples,
                                             new_tokens=args.new_tokens, eval_interval=1, select_items=1,
                                             eval_items=args.eval_items, task_params={}))
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu = time.perf_counter(), time.process_time()
            folders = train_with_comlrl(model=args.model, seed=seed, epochs=args.epochs, lr=args.lr,
                                        samples=args.samples, new_tokens=args.new_tokens,
                                        eval_items=args.eval_items, out=Path(tmp))
            train_wall, train_cpu = time.perf_counter() - wall, time.process_time() - cpu
            base = evaluate_run(config, samples=args.samples, seed=args.eval_seed)
            trained = evaluate_run(config, models=folders, samples=args.samples, seed=args.eval_seed)
        results[str(seed)] = {
            "step 0": {"value": base.metrics[METRIC], "se": base.standard_errors[METRIC]},
            "trained": {"value": trained.metrics[METRIC], "se": trained.standard_errors[METRIC],
                        "updates": args.epochs * 16},
            "train_wall_min": train_wall / 60, "train_cpu_min": train_cpu / 60}
        if not args.json:
            print(f"seed {seed}: {json.dumps(results[str(seed)])}", flush=True)
    report = {"trainer": "comlrl 1.4.3 MAGRPO", "model": args.model, "epochs": args.epochs, "lr": args.lr,
              "samples": args.samples, "seeds": results}
    print(json.dumps(report, sort_keys=True), flush=True)
    return report


if __name__ == "__main__":
    main()
