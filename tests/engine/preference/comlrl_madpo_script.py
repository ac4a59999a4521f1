"""A MADPO training script written against CoMLRL 1.4.3's API. The only change from the CoMLRL
original is the import block below.

Usage: python comlrl_madpo_script.py MODEL_DIR_A MODEL_DIR_B OUTPUT_DIR
"""

import sys

from datasets import Dataset

# --- the only change: was `from comlrl.trainers.preference import MADPOConfig, MADPOTrainer`
# --- and `from comlrl.utils.reward_processor import RewardProcessors`
from engine import MADPOConfig, MADPOTrainer, RewardProcessors

model_a, model_b, output_dir = sys.argv[1:4]

train_data = Dataset.from_list([{"prompt": f"Write a story about topic {i}."} for i in range(3)])
eval_data = Dataset.from_list([{"prompt": "Write a story about the sea."}])


def length_ratio_reward(completions1, completions2):
    """Higher when the second answer is about twice as long as the first."""
    return [-abs(len(c2) / max(len(c1), 1) - 2.0) for c1, c2 in zip(completions1, completions2, strict=True)]


def summary_formatter(example):
    return f"Summarise: {example['prompt']}"


def expansion_formatter(example):
    return f"Expand: {example['prompt']}"


config = MADPOConfig(
    num_train_epochs=1,
    agent_learning_rate=5e-4,
    max_new_tokens=6,
    preference_num_candidates=4,
    preference_pairs_per_sample=2,
    pair_selection="reward_gap",
    dpo_beta=0.1,
    num_generations=4,
    logging_steps=1,
    eval_interval=2,
    eval_num_samples=1,
)
trainer = MADPOTrainer(
    agents=[model_a, model_b],
    train_dataset=train_data,
    eval_dataset=eval_data,
    reward_func=length_ratio_reward,
    reward_processor=RewardProcessors.shift(1.0),
    formatters=[summary_formatter, expansion_formatter],
    args=config,
)
trainer.train()
trainer.save_model(output_dir)
