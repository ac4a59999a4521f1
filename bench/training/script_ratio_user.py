"""The user script of ``python -m bench.training.script_ratio``: a CoMLRL-style training script.

:func:`train_team` is what a CoMLRL user writes: load two agents with transformers, build
``MAGRPOConfig`` and ``MAGRPOTrainer(agents=..., tokenizer=..., train_dataset=..., reward_func=...,
formatters=..., args=...)`` and call ``.train()``. The trainer package is its first argument, so the
same code runs as ``from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer`` and as
``from engine import MAGRPOConfig, MAGRPOTrainer``: only the import differs.

The workload is the real-model benchmark's: plain-text prompts (no chat template, as CoMLRL
samples), K completions per agent, one item, one update, the trainers' own defaults otherwise.
With ``full_length`` (the benchmark's setting) EOS is made unreachable
(:func:`bench.training.workload.never_eos`, applied alike to both trainers), so every completion
is exactly ``max_new_tokens`` long and the generated tokens are known exactly; the reward function
also re-encodes the distinct completions it is given and counts their tokens, a check that both
trainers generated about that much.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

from bench.training.workload import PROMPTS, formatters, length_ratio_reward, never_eos


@dataclass
class TokenCount:
    """What the reward function saw: its calls, and each agent's distinct completions with their
    re-encoded token counts (a trainer may show a completion to the reward more than once: CoopLab's
    opt-in ``credit_samples`` calls it again with one agent's reply left empty)."""

    tokenizers: list[Any]
    calls: int = 0
    seen: list[dict[str, int]] = field(default_factory=list)

    def reward(self, completions1: list[str], completions2: list[str]) -> list[float]:
        """The benchmark's reward (:func:`bench.training.workload.length_ratio_reward`), counting as it goes."""
        self.calls += 1
        if not self.seen:
            self.seen = [{} for _ in self.tokenizers]
        for tokenizer, seen, texts in zip(self.tokenizers, self.seen, (completions1, completions2), strict=True):
            for text in texts:
                if text and text not in seen:
                    seen[text] = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        return length_ratio_reward(completions1, completions2)

    @property
    def completions(self) -> int:
        return sum(len(seen) for seen in self.seen)

    @property
    def tokens(self) -> int:
        return sum(sum(seen.values()) for seen in self.seen)


def trainer_classes(package: str) -> tuple[Any, Any]:
    """``MAGRPOConfig`` and ``MAGRPOTrainer`` from ``package``: the script's only varying line."""
    module = importlib.import_module(package)
    return module.MAGRPOConfig, module.MAGRPOTrainer


def train_team(package: str, model_folder: str, *, num_generations: int = 4, max_new_tokens: int = 48,
               full_length: bool = True, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train two agents of ``model_folder`` for one step with ``package``'s trainer; the timings of
    ``trainer.train()`` (wall and CPU seconds; model loading and the trainer's constructor are timed
    apart) and what the reward function counted. ``settings``: extra ``MAGRPOConfig`` fields (none
    for the defaults)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    MAGRPOConfig, MAGRPOTrainer = trainer_classes(package)  # noqa: N806 (the classes, named as imported)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    tokenizers = [AutoTokenizer.from_pretrained(model_folder) for _ in range(2)]
    models = [AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32) for _ in range(2)]
    if full_length:
        for model, tokenizer in zip(models, tokenizers, strict=True):
            never_eos(model, tokenizer)
    count = TokenCount(tokenizers)
    t1 = time.perf_counter()
    config = MAGRPOConfig(num_train_epochs=1, num_turns=1, num_generations=num_generations,
                          max_new_tokens=max_new_tokens, rollout_buffer_size=1, **(settings or {}))
    trainer = MAGRPOTrainer(agents=models, tokenizer=tokenizers,
                            train_dataset=Dataset.from_list([{"prompt": PROMPTS[0]}]),
                            reward_func=count.reward, formatters=formatters(2), args=config)
    t2, c2 = time.perf_counter(), time.process_time()
    trainer.train()
    t3, c3 = time.perf_counter(), time.process_time()
    return {
        "load_s": t1 - t0, "setup_s": t2 - t1, "train_s": t3 - t2, "train_cpu_s": c3 - c2,
        "reward_calls": count.calls, "completions": count.completions, "tokens_reencoded": count.tokens,
        "tokens_generated": (2 * num_generations * max_new_tokens) if full_length else None,
        "torch_threads": torch.get_num_threads(), "cpu_affinity": sorted(os.sched_getaffinity(0)),
    }
