"""MADPO learns: on a cooperative reward (the share of digits in both agents' answers) the team
reward the test samples after training beats the one it samples before, for each of three seeds.

Offline DPO on pairs from the initial policy (16 candidates per item, the 4 widest reward gaps),
one epoch of four steps; rewards are measured by 16 sampled answers per prompt on the four prompts.
"""

from __future__ import annotations

import statistics

from engine import MADPOConfig, MADPOTrainer
from engine.models.tiny import build_tiny_model
from tests.engine.preference.pref_helpers import PROMPTS, digit_share


def _before_after(seed: int) -> tuple[float, float]:
    m1, t1 = build_tiny_model("llama", "xs", seed=seed)
    m2, t2 = build_tiny_model("llama", "xs", seed=seed + 10)
    config = MADPOConfig(preference_num_candidates=16, preference_pairs_per_sample=4, max_new_tokens=8,
                         temperature=1.0, top_p=1.0, top_k=50, agent_learning_rate=1e-2, dpo_beta=0.5,
                         num_train_epochs=1, train_batch_size=4, items_per_step=4, eval_interval=0,
                         eval_num_samples=4, eval_samples_per_item=16, transcripts_per_step=0, seed=seed)
    trainer = MADPOTrainer(agents=[m1, m2], tokenizer=[t1, t2], train_dataset=PROMPTS, eval_dataset=PROMPTS,
                           reward_func=digit_share, args=config)
    before = trainer.evaluate()["eval/reward_mean"]
    trainer.train()
    return before, trainer.evaluate()["eval/reward_mean"]


def test_team_reward_rises_after_training_for_every_seed() -> None:
    results = [_before_after(seed) for seed in (0, 1, 2)]
    assert all(after > before for before, after in results), results
    gain = statistics.mean(after - before for before, after in results)
    assert gain > 0.02, results
