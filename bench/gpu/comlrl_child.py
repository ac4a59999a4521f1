"""CoMLRL 1.4.3 on the benchmark of record's workload, in a process of its own:
``python -m bench.gpu.comlrl_child --shape S --device D --workload JSON``.

The same models (shape, seeds, dtype), tokenizer, prompts, K, new tokens and sampling settings as
CoopLab's side, through CoMLRL's ``MAGRPOTrainer`` for one epoch of ``warmup + comlrl_steps`` steps
of ``comlrl_items`` items each (its ``rollout_buffer_size``: an update after every step's items).
It prints one JSON line per event as it goes, so a run stopped by its time limit still reports the
steps it finished: ``{"event": "ready", ...}`` when the trainer is built, ``{"event": "step",
"t": ...}`` after each step's update (the device synchronised), ``{"event": "done", ...}`` at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import fields
from typing import Any


def emit(event: str, **data: Any) -> None:
    print(json.dumps({"event": event, **data}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.comlrl_child")
    parser.add_argument("--shape", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--workload", required=True, help="the GpuWorkload's fields, as JSON")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (the parent's)")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from datasets import Dataset

    from bench.gpu.cooplab_side import peak_memory, synchronize
    from bench.gpu.workload import GpuWorkload, SeededReward, build_team, dataset, identity_formatters
    from bench.training.vs_comlrl import import_comlrl

    known = {f.name for f in fields(GpuWorkload)}
    raw = {k: v for k, v in json.loads(args.workload).items() if k in known}
    w = GpuWorkload(**{**raw, "shapes": tuple(raw.get("shapes", ()))})
    config_cls, trainer_cls = import_comlrl()
    torch.manual_seed(w.seed)
    models, tokenizer = build_team(args.shape, args.device, w)
    vocab = models[0].get_output_embeddings().weight.shape[0]
    total = w.warmup_steps + w.comlrl_steps
    config = config_cls(
        num_train_epochs=1, agent_learning_rate=w.learning_rate, num_generations=w.num_generations,
        max_new_tokens=w.max_new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, num_turns=1,
        rollout_buffer_size=w.comlrl_items, eval_interval=0, logging_steps=1, agent_devices=args.device,
    )  # fmt: skip
    reward = SeededReward(w.seed)
    trainer = trainer_cls(
        agents=models, tokenizer=[tokenizer] * len(models), reward_func=reward,
        train_dataset=Dataset.from_list(dataset(w, total * w.comlrl_items, vocab)),
        formatters=identity_formatters(len(models)), args=config, wandb_config=None,
    )  # fmt: skip
    trainer.verbose = False
    original = trainer._train_step_returns
    items = {"done": 0}

    def timed_item(*a: Any, **kw: Any) -> Any:  # the update runs inside the item that fills the buffer
        result = original(*a, **kw)
        items["done"] += 1
        if items["done"] % w.comlrl_items == 0:
            synchronize(args.device)
            emit("step", t=time.perf_counter(), items=items["done"])
        return result

    trainer._train_step_returns = timed_item
    synchronize(args.device)
    emit("ready", t=time.perf_counter(), steps=total, items_per_step=w.comlrl_items)
    trainer.train()
    peak, kind = peak_memory(args.device)
    emit("done", t=time.perf_counter(), peak_mem_gib=peak, peak_mem_kind=kind,
         mean_completion_words=reward.words / max(reward.completions, 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
