"""comparator_checkpoint: the iterative trainers' comparator samples with an earlier run's checkpoint
weights; a missing or foreign folder is refused by the config rule, the trainer and the pre-flight."""

from __future__ import annotations

import pytest
import torch

from engine import MADPOIterConfig, MADPOIterTrainer, MARLHFIterConfig
from engine.examples import example_path
from engine.schema.preflight import preflight_problems
from engine.schema.run_config import load_run_config
from tests.engine.preference.pref_helpers import PROMPTS, digit_share, fast_config, make_trainer, tiny_team


def _saved_checkpoint(folder) -> list[dict]:
    """A checkpoint of a MADPO team whose weights differ from a fresh tiny team's; its weights."""
    earlier = make_trainer(fast_config())
    with torch.no_grad():
        for agent in earlier.agents:
            for p in agent.model.parameters():
                p.add_(0.05)
    earlier.save_checkpoint(folder)
    return [{k: v.detach().clone() for k, v in a.model.state_dict().items()} for a in earlier.agents]


def _iter_trainer(checkpoint) -> MADPOIterTrainer:
    config = MADPOIterConfig(num_iterations=1, preference_num_candidates=4, preference_pairs_per_sample=2,
                             max_new_tokens=6, train_batch_size=4, items_per_step=4, comparator_policy="model",
                             comparator_checkpoint=str(checkpoint), eval_interval=0, logging_steps=1,
                             agent_learning_rate=1e-3, checkpoint_interval=0, max_steps=1)
    models, tokenizers = tiny_team()
    return MADPOIterTrainer(agents=models, tokenizer=tokenizers, train_dataset=PROMPTS, reward_func=digit_share,
                            args=config)


def test_the_comparator_samples_with_the_checkpoint_weights(tmp_path) -> None:
    saved = _saved_checkpoint(tmp_path / "checkpoint-3")
    trainer = _iter_trainer(tmp_path / "checkpoint-3")
    result = trainer.train()
    assert result.step == trainer.total_steps == 1
    assert trainer.collector.comparator_tree is not None
    for copy, theirs, agent in zip(trainer._comparator_copies, saved, trainer.agents, strict=True):
        state = copy.state_dict()
        assert all(torch.equal(state[k], v) for k, v in theirs.items())
        assert any(not torch.equal(state[k], v) for k, v in agent.model.state_dict().items())


def test_a_missing_or_foreign_checkpoint_is_refused(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"comparator_checkpoint: the checkpoint folder .*gone does not exist"):
        _iter_trainer(tmp_path / "gone")
    (tmp_path / "half").mkdir()
    with pytest.raises(FileNotFoundError, match=r"not a checkpoint folder \(no trainer_state.pt, meta.json\)"):
        _iter_trainer(tmp_path / "half")
    with pytest.raises(ValueError, match="comparator_checkpoint: a checkpoint is the comparator of "
                                         "comparator_policy='model'"):
        MARLHFIterConfig(comparator_policy="history", comparator_checkpoint=str(tmp_path))


def test_preflight_names_a_missing_checkpoint(tmp_path) -> None:
    run = load_run_config(example_path("madpo_iter"))
    trainer = run.trainer.model_copy(update={"comparator_policy": "model", "comparator_history_k": None,
                                             "comparator_checkpoint": str(tmp_path / "checkpoint-9")})
    problems = preflight_problems(run.model_copy(update={"trainer": trainer}))
    assert [(p.field, "checkpoint-9 does not exist" in p.message) for p in problems] == [
        ("trainer.comparator_checkpoint", True)]
