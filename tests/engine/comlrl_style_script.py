"""A training script written against CoMLRL 1.4.3's API (its docs quick-start, extended to two
turns). The only change from the CoMLRL original is the import block below.

Usage: python comlrl_style_script.py MODEL_DIR_A MODEL_DIR_B OUTPUT_DIR NUM_TURNS JOINT_MODE
"""

import math
import sys

from datasets import Dataset

# --- the only change: was `from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer`
# --- and `from comlrl.utils.reward_processor import RewardProcessors`
from engine import MAGRPOConfig, MAGRPOTrainer, RewardProcessors

model_a, model_b, output_dir, num_turns, joint_mode = sys.argv[1:6]
num_turns = int(num_turns)

train_data = Dataset.from_list([{"prompt": f"Write a story about topic {i}."} for i in range(4)])
eval_data = Dataset.from_list([{"prompt": "Write a story about the sea."}])


def length_ratio_reward(completions1, completions2):
    """1 when the second answer is 2-3x as long as the first, else exp(-distance)."""
    rewards = []
    for c1, c2 in zip(completions1, completions2, strict=True):
        ratio = len(c2) / max(len(c1), 1)
        rewards.append(1.0 if 2 <= ratio <= 3 else math.exp(-min(abs(ratio - 2), abs(ratio - 3))))
    return rewards


def summary_formatter(example, external_prompts=None):
    return external_prompts if external_prompts is not None else f"Summarise: {example['prompt']}"


def expansion_formatter(example):
    return f"Expand: {example['prompt']}"


def feedback_transition(*, prompt, agent_completions, num_agents, prompt_history_per_agent,
                        response_history_per_agent):
    return [f"{prompt}\nYour last answer: {agent_completions[i]}\nImprove it." for i in range(num_agents)]


def eval_logger(agent_completions_turns, batch_items=None, prompts=None):
    return [{"len_ratio": len(agent_completions_turns[1][i][-1]) / max(len(agent_completions_turns[0][i][-1]), 1)}
            for i in range(len(prompts))]


def eval_aggregator(metrics, num_turns=1):
    return {"turn_1/avg_len_ratio": sum(m["len_ratio"] for m in metrics) / len(metrics)}


config = MAGRPOConfig(
    num_train_epochs=1,
    agent_learning_rate=5e-4,
    num_generations=2,
    num_turns=num_turns,
    max_new_tokens=8,
    joint_mode=joint_mode,
    logging_steps=1,
    eval_interval=2,
    eval_num_samples=1,
)
trainer = MAGRPOTrainer(
    agents=[model_a, model_b],
    train_dataset=train_data,
    eval_dataset=eval_data,
    reward_func=length_ratio_reward,
    reward_processor=RewardProcessors.scale(10),
    formatters=[summary_formatter, expansion_formatter],
    external_transition=feedback_transition if num_turns > 1 else None,
    eval_logger=eval_logger,
    eval_aggregator=eval_aggregator,
    args=config,
)
trainer.train()
trainer.save_model(output_dir)
