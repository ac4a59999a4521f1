"""MADPO per-step time: CoopLab's ``MADPOTrainer`` against CoMLRL 1.4.3's on equal work.

Both sides get the same tiny agents (one seed each), the same items, ``num_generations``
candidates per agent and item, the same completion length (EOS made unreachable, so every
candidate runs to ``max_new_tokens`` on both sides), ``pair_selection="reward_gap"`` with
``items_per_update`` pairs kept per item, and ``train_batch_size = items_per_update``: one DPO step
per collected item, one epoch. A run is timed in two phases:

- *collection*: sampling, scoring and pairing every item's candidates (seconds per item);
- *DPO steps*: per-step seconds between consecutive updates, the first ``warmup_steps`` untimed.

Each part runs in its own process (``bench.training.runner.run_part``); with several rounds the
parts interleave, so a change in the machine's load hits every part alike. Ratios use median CPU
seconds (one torch thread per process); wall-clock figures are reported next to them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.training import workload as wl
from bench.training.workload import Workload


def madpo_workload(w: Workload) -> Workload:
    """The MADPO form of ``w``: candidates run to their length cap on both sides (equal work)."""
    return replace(w, full_length=True)


def _settings(w: Workload) -> dict[str, Any]:
    """The MADPO fields both trainers take, with the same values."""
    return {
        "num_train_epochs": 1, "agent_learning_rate": w.learning_rate, "max_new_tokens": w.max_new_tokens,
        "temperature": w.temperature, "top_p": w.top_p, "top_k": w.top_k, "num_turns": 1, "eval_interval": 0,
        "preference_num_candidates": w.num_generations, "preference_pairs_per_sample": w.items_per_update,
        "pair_selection": "reward_gap", "rollout_buffer_size": w.items_per_update,
        "train_batch_size": w.items_per_update,
    }  # fmt: skip


def _items(w: Workload) -> list[dict[str, str]]:
    return wl.dataset(replace(w, items_per_update=1))  # one item per DPO step


def _collection(started: tuple[float, float], ended: tuple[float, float], items: int, pairs: int) -> dict[str, Any]:
    return {"collect_s": ended[0] - started[0], "collect_cpu_s": ended[1] - started[1],
            "collect_cpu_s_per_item": (ended[1] - started[1]) / items, "items": items, "pairs": pairs}


def run_engine_madpo(w: Workload) -> dict[str, Any]:
    """CoopLab's MADPOTrainer: the collection timed alone, then every DPO step by the sink's clock."""
    from bench.training.parts import _ClockSink
    from engine import MADPOConfig, MADPOTrainer

    models, tokenizers = wl.setup_agents(w)
    config = MADPOConfig(**_settings(w), seed=w.seed, items_per_step=w.items_per_step, fast_decode=w.fast_decode,
                         logging_steps=1)
    trainer = MADPOTrainer(agents=models, tokenizer=tokenizers, train_dataset=_items(w),
                           reward_func=wl.length_ratio_reward, formatters=wl.formatters(w.num_agents), args=config)
    try:
        started = wl.clock()
        pairs = trainer.collect_pairs()
        collected = wl.clock()
        sink = _ClockSink()
        sink.mark()
        trainer.train(sink=sink)  # the collection is done: the DPO steps only
    finally:
        trainer.close()
    return {**wl.summarize(sink.marks, w), **_collection(started, collected, len(_items(w)), len(pairs)),
            "steps": len(sink.marks) - 1, "peak_mem_mb": wl.peak_memory_mb()}


def run_comlrl_madpo(w: Workload) -> dict[str, Any]:
    """CoMLRL 1.4.3's MADPOTrainer: its collection and each ``_update_from_preference_batch`` timed."""
    from bench.training.vs_comlrl import import_comlrl

    import_comlrl()
    from comlrl.trainers.preference.madpo import MADPOConfig, MADPOTrainer
    from datasets import Dataset

    models, tokenizers = wl.setup_agents(w)
    trainer = MADPOTrainer(agents=models, tokenizer=tokenizers, train_dataset=Dataset.from_list(_items(w)),
                           reward_func=wl.length_ratio_reward, formatters=wl.formatters(w.num_agents),
                           args=MADPOConfig(**_settings(w), logging_steps=1), wandb_config=None)
    trainer.verbose = False
    marks: list[tuple[float, float]] = []
    seen: dict[str, Any] = {}
    build, update = trainer._build_preference_dataset, trainer._update_from_preference_batch

    def timed_build(*args: Any, **kwargs: Any) -> Any:
        seen["started"] = wl.clock()
        pairs = build(*args, **kwargs)
        seen["collected"], seen["pairs"] = wl.clock(), len(pairs)
        marks.append(wl.clock())
        return pairs

    def timed_update(*args: Any, **kwargs: Any) -> Any:
        result = update(*args, **kwargs)
        marks.append(wl.clock())
        return result

    trainer._build_preference_dataset, trainer._update_from_preference_batch = timed_build, timed_update
    import random

    random.seed(w.seed)  # CoMLRL shuffles the pairs with the global RNG
    trainer.train()
    return {**wl.summarize(marks, w), **_collection(seen["started"], seen["collected"], len(_items(w)), seen["pairs"]),
            "steps": len(marks) - 1, "peak_mem_mb": wl.peak_memory_mb()}
