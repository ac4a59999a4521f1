"""MADPOIter: iterations of collect-then-train with a comparator policy, a schedule known up front,
and a run resumed mid-iteration that equals the uninterrupted one."""

from __future__ import annotations

import pytest
import torch

from engine import MADPOConfig, MADPOIterConfig, MADPOIterTrainer
from engine.examples import example_path
from engine.schema.configure import trainer_config
from engine.schema.run_config import load_run_config
from engine.sinks import MemorySink
from tests.engine.preference.pref_helpers import PROMPTS, digit_share, tiny_team, weights


def _config(**overrides) -> MADPOIterConfig:
    values = dict(num_iterations=2, preference_num_candidates=4, preference_pairs_per_sample=2, max_new_tokens=6,
                  train_batch_size=4, items_per_step=4, comparator_policy="history", eval_interval=0,
                  logging_steps=1, agent_learning_rate=1e-3, checkpoint_interval=0, seed=0)
    values.update(overrides)
    return MADPOIterConfig(**values)


def _trainer(config: MADPOIterConfig, **kwargs) -> MADPOIterTrainer:
    models, tokenizers = tiny_team()
    return MADPOIterTrainer(agents=models, tokenizer=tokenizers, train_dataset=PROMPTS, reward_func=digit_share,
                            args=config, **kwargs)


def test_iterations_compare_with_the_policy_one_iteration_back(tmp_path) -> None:
    replay = {"preference_replay_mode": "all_history"}  # iteration 2 trains on draws over both iterations' pairs
    sink = MemorySink()
    trainer = _trainer(_config(**replay), sink=sink, output_dir=tmp_path / "full")
    assert trainer.steps_per_iteration == 2 and trainer.total_steps == 4  # 4 items x 2 pairs / 4 per step
    result = trainer.train()
    assert result.step == 4
    assert [s.metrics["iter/current_iteration"] for s in sink.steps] == [1, 1, 2, 2]
    assert [("pairs/total" in s.metrics) for s in sink.steps] == [True, False] * 2  # collected per iteration
    assert trainer.comparator_iteration == 0  # iteration 2 compared with the policy one iteration back
    comparator = trainer._comparator_copies[0].state_dict()
    assert all(torch.equal(comparator[k], v) for k, v in trainer.snapshots[0][0].items())
    assert any(not torch.equal(trainer.snapshots[0][0][k], trainer.snapshots[1][0][k]) for k in comparator)
    first, current = trainer.replay_shards
    assert len(trainer.training_pairs) == len(current) == sink.steps[-1].metrics["iter/train_preference_pairs"]
    assert {id(p) for p in trainer.training_pairs} & {id(p) for p in first}  # replayed from iteration 1

    # stopped after step 3 (mid-iteration 2), resumed: the same weights, metrics and pairs
    part = _trainer(_config(**replay), sink=MemorySink(stop_after_steps=3), output_dir=tmp_path / "part")
    assert part.train().status == "stopped"
    resumed_sink = MemorySink()
    resumed = _trainer(_config(**replay), sink=resumed_sink)
    resumed.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / "checkpoint-3")
    for a, b in zip(weights(trainer), weights(resumed), strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key
    assert [s.metrics["dpo/loss"] for s in sink.steps[3:]] == [s.metrics["dpo/loss"] for s in resumed_sink.steps]
    assert resumed.env_step == trainer.env_step


def test_settings_and_run_config() -> None:
    config = MADPOIterConfig()
    assert (config.num_train_epochs, config.preference_num_candidates, config.preference_pairs_per_sample,
            config.pair_selection, config.num_iterations, config.comparator_policy) == (
        1, 20, 4, "comparator_reward", 6, "current")  # CoMLRL's MADPOIterConfig defaults
    with pytest.raises(ValueError, match="pair_selection: 'comparator_reward' compares with a comparator"):
        MADPOConfig(pair_selection="comparator_reward")
    with pytest.raises(ValueError, match="preference_pairs_per_sample: the iterative trainers need a number"):
        MADPOIterConfig(preference_pairs_per_sample=None)
    with pytest.raises(ValueError, match="comparator_policy"):
        MADPOIterConfig(comparator_policy="api")
    run = load_run_config(example_path("madpo_iter"))
    cfg = trainer_config(run.trainer, run.agents)
    assert isinstance(cfg, MADPOIterConfig) and cfg.comparator_policy == "history" and cfg.num_iterations == 3
