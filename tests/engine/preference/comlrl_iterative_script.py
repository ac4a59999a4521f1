"""Iterative preference scripts written against CoMLRL 1.4.3's API: MADPOIter against an OpenAI-style
comparator API with replay shards, policy snapshots and reward distributions on disk, then MARLHF with
an IAC stage and its critic settings. The only change from the CoMLRL originals is the import block.

Usage: python comlrl_iterative_script.py MODEL_DIR_A MODEL_DIR_B API_URL OUTPUT_DIR
"""

import os
import sys

from datasets import Dataset

# --- the only change: was `from comlrl.trainers.preference import MADPOIterConfig, MADPOIterTrainer,`
# --- `MARLHFConfig, MARLHFTrainer`
from engine import MADPOIterConfig, MADPOIterTrainer, MARLHFConfig, MARLHFTrainer

model_a, model_b, api_url, output_dir = sys.argv[1:5]

train_data = Dataset.from_list([{"prompt": f"List numbers about topic {i}."} for i in range(3)])


def digit_reward(completions1, completions2):
    """The share of digits across both answers."""
    return [sum(ch.isdigit() for ch in c1 + c2) / max(len(c1 + c2), 1)
            for c1, c2 in zip(completions1, completions2, strict=True)]


iter_config = MADPOIterConfig(
    num_iterations=2,
    num_train_epochs=1,
    agent_learning_rate=5e-4,
    max_new_tokens=6,
    preference_num_candidates=3,
    preference_pairs_per_sample=2,
    comparator_policy="api",
    comparator_api_url=api_url,
    comparator_api_format="openai",
    comparator_api_model="gpt-test",
    comparator_api_max_n_per_request=2,
    comparator_api_key_env="COMPARATOR_TEST_KEY",
    comparator_num_candidates=3,
    preference_replay_mode="nearest_k",
    preference_replay_k=2,
    preference_replay_dir=os.path.join(output_dir, "replay"),
    policy_checkpoint_dir=os.path.join(output_dir, "policies"),
    log_reward_distribution=True,
    logging_steps=1,
    eval_interval=0,
)
iterative = MADPOIterTrainer(agents=[model_a, model_b], train_dataset=train_data, reward_func=digit_reward,
                             args=iter_config)
iterative.train()
iterative.save_model(os.path.join(output_dir, "madpo_iter"))

rlhf_config = MARLHFConfig(
    rl_algorithm="iac",
    num_generations=1,
    num_train_epochs=1,
    max_new_tokens=6,
    preference_num_candidates=4,
    preference_pairs_per_sample=2,
    reward_num_train_epochs=1,
    critic_learning_rate=1e-4,
    value_loss_coef=0.5,
    critic_type="v",
    logging_steps=1,
    eval_interval=0,
    rollout_buffer_size=2,
)
rlhf = MARLHFTrainer(agents=[model_a, model_b], train_dataset=train_data, reward_func=digit_reward, args=rlhf_config)
rlhf.train()
rlhf.save_model(os.path.join(output_dir, "marlhf"))
