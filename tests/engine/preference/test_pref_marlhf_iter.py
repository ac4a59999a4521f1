"""MARLHFIter: each iteration collects pairs against the comparator and refits the reward model,
then RL steps against it; a run stopped mid-iteration resumes to the uninterrupted run's weights."""

from __future__ import annotations

import pytest
import torch

from engine import MARLHFConfig, MARLHFIterConfig, MARLHFIterTrainer
from engine.examples import example_path
from engine.schema.configure import trainer_config
from engine.schema.run_config import load_run_config
from engine.sinks import MemorySink
from tests.engine.preference.pref_helpers import PROMPTS, digit_share, tiny_team, weights


def _trainer(**kwargs) -> MARLHFIterTrainer:
    models, tokenizers = tiny_team()
    config = MARLHFIterConfig(num_iterations=2, num_train_epochs=1, preference_num_candidates=4,
                              preference_pairs_per_sample=2, max_new_tokens=6, num_generations=2, items_per_step=2,
                              comparator_policy="model", reward_learning_rate=1e-3, reward_train_batch_size=4,
                              reward_num_train_epochs=1, eval_interval=0, logging_steps=1, agent_learning_rate=1e-3,
                              preference_replay_mode="nearest_k", preference_replay_k=2,
                              preference_replay_sample_size=6,  # refits on 6 pairs drawn over 2 iterations
                              seed=0)
    return MARLHFIterTrainer(agents=models, tokenizer=tokenizers, train_dataset=PROMPTS, reward_func=digit_share,
                             args=config, **kwargs)


def test_iterations_refit_the_reward_model_and_resume_mid_iteration(tmp_path) -> None:
    sink = MemorySink()
    full = _trainer(sink=sink)
    assert full.steps_per_iteration == 2 and full.total_steps == 4  # 4 items, 2 per step, one epoch each
    full.train()
    assert [s.metrics["iter/current_iteration"] for s in sink.steps] == [1, 1, 2, 2]
    refits = [s.metrics.get("reward_model/optimizer_steps") for s in sink.steps]
    assert refits[0] and refits[2] and refits[1] is None and refits[3] is None  # refit at each iteration start
    assert full.comparator_iteration == 0  # comparator_policy "model": the initial policy
    assert [s.metrics["iter/train_preference_pairs"] for s in sink.steps] == [6] * 4
    assert refits[2] == 2  # ceil(6 replayed pairs / reward_train_batch_size 4), one epoch

    part = _trainer(sink=MemorySink(stop_after_steps=3), output_dir=tmp_path)
    assert part.train().status == "stopped"
    resumed = _trainer()
    resumed.train(resume_from_checkpoint=tmp_path / "checkpoints" / "checkpoint-3")
    for a, b in zip(weights(full), weights(resumed), strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key
    for (key, a), b in zip(full.reward_model.state_dict().items(), resumed.reward_model.state_dict().values(),
                           strict=True):
        assert torch.equal(a, b), key


def test_settings_and_run_config() -> None:
    config = MARLHFIterConfig()
    assert (config.num_train_epochs, config.reward_num_train_epochs, config.preference_num_candidates,
            config.pair_selection) == (2, 2, 20, "comparator_reward")  # CoMLRL's MARLHFIterConfig defaults
    with pytest.raises(ValueError, match="pair_selection: 'comparator_reward' compares with a comparator"):
        MARLHFConfig(pair_selection="comparator_reward")
    run = load_run_config(example_path("marlhf_iter"))
    assert isinstance(trainer_config(run.trainer, run.agents), MARLHFIterConfig)
