"""MARLHF: the Bradley-Terry loss by hand, the joint reward model ranking held-out pairs above
chance on a tiny task, the RL stage optimising the learned reward while evaluation keeps the
task's, and a checkpoint carrying pairs and reward model into a resumed run."""

from __future__ import annotations

import math

import pytest
import torch

from engine import MAGRPOConfig
from engine.models.tiny import build_tiny_model
from engine.preference.collect import PairCollector
from engine.preference.marlhf import MARLHFTrainer
from engine.preference.reward_model import bradley_terry_loss, joint_text
from engine.schema.preference_configs import MARLHFConfig
from engine.sinks import MemorySink

TRAIN = [{"prompt": f"Item {i}:"} for i in range(8)]
HELD_OUT = [{"prompt": f"Other {i}:"} for i in range(4)]


def ends_with_digit(completions1, completions2):
    """Tiny task: the team's answer should end on a digit (1.0), a letter is half right (0.5)."""
    last = completions2[0].rstrip()[-1:]
    return [1.0 if last.isdigit() else 0.5 if last.isalpha() else 0.0]


def test_bradley_terry_loss_by_hand() -> None:
    """Scores (2, 1) and (0, 0): (log(1 + e^-1) + log 2) / 2 = (0.313262 + 0.693147) / 2."""
    loss = bradley_terry_loss(torch.tensor([2.0, 0.0]), torch.tensor([1.0, 0.0]))
    assert loss.item() == pytest.approx(0.5032045, abs=1e-6)
    assert joint_text(["p0", "p1"], ["r0", "r1"]) == "Agent 0 prompt:\np0\nAgent 0 response:\nr0\n\n" \
                                                     "Agent 1 prompt:\np1\nAgent 1 response:\nr1"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("llama", "xs", seed=10)
    config = MARLHFConfig(preference_num_candidates=8, preference_pairs_per_sample=8, max_new_tokens=6,
                          temperature=1.0, top_p=1.0, reward_learning_rate=3e-3, reward_num_train_epochs=3,
                          reward_train_batch_size=8, num_generations=2, max_steps=1, items_per_step=8,
                          eval_interval=1, eval_num_samples=1, logging_steps=1, seed=0)
    sink = MemorySink()
    out = tmp_path_factory.mktemp("marlhf")
    trainer = MARLHFTrainer(agents=[m1, m2], tokenizer=[t1, t2], train_dataset=TRAIN, eval_dataset=HELD_OUT[:1],
                            reward_func=ends_with_digit, args=config, sink=sink, output_dir=out)
    trainer.train()
    return trainer, sink, out


def test_reward_model_ranks_held_out_pairs_above_chance(trained) -> None:
    trainer, sink, _ = trained
    held_out = PairCollector(trainer.collector.tree, HELD_OUT, len(HELD_OUT), selection="all", limit=None,
                             items_per_chunk=4, seed=1)
    held_out.collect(lambda: False)
    accuracy = trainer.reward_model.accuracy(held_out.pairs)
    # chance is 0.5; with n >= 40 pairs, 0.65 is more than two standard deviations above it
    assert len(held_out.pairs) >= 40 and accuracy >= 0.65, (accuracy, len(held_out.pairs))
    first = sink.steps[0].metrics
    assert first["pairs/total"] == len(trainer.collector.pairs) and first["reward_model/train_accuracy"] > 0.9


def test_rl_stage_uses_the_learned_reward_and_evaluation_the_tasks(trained) -> None:
    trainer, sink, _ = trained
    train_rewards = [x for node in trainer.rollout(TRAIN[:1]).nodes for x in node.rewards]
    assert not set(train_rewards) <= {0.0, 0.5, 1.0}  # reward-model scores, not the task's three levels
    evals = [m["eval/reward_mean"] for _, _, m in sink.metrics if "eval/reward_mean" in m]
    assert evals and all(v in (0.0, 0.5, 1.0) for v in evals)  # one item, one sample: the task's levels
    assert math.isfinite(sink.steps[0].metrics["agent/agent_0/loss"])


def test_checkpoint_restores_pairs_and_reward_model(trained) -> None:
    trainer, _, out = trained
    m1, t1 = build_tiny_model("llama", "xs", seed=5)
    m2, t2 = build_tiny_model("llama", "xs", seed=6)
    fresh = MARLHFTrainer(agents=[m1, m2], tokenizer=[t1, t2], train_dataset=TRAIN, reward_func=ends_with_digit,
                          args=MARLHFConfig(num_generations=2, max_steps=1))
    fresh.load_checkpoint(out / "checkpoints" / "checkpoint-1")
    assert fresh.reward_model_trained and fresh.collector.state() == trainer.collector.state()
    for (k, a), b in zip(trainer.reward_model.state_dict().items(), fresh.reward_model.state_dict().values(),
                         strict=True):
        assert torch.equal(a, b), k
    assert fresh.train().step == 1  # nothing left to collect, fit or train


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="rl_algorithm"):
        MARLHFConfig(rl_algorithm="ppo")
    assert MARLHFConfig(rl_algorithm="MAAC", num_generations=1).rl_algorithm == "maac"  # actor-critic: no siblings
    with pytest.raises(ValueError, match="num_turns: MARLHF is single-turn"):
        MARLHFConfig(num_turns=2)
    assert MARLHFConfig(rl_algorithm="mareforce").advantage_mode == "raw"  # CoMLRL's alias
    m, t = build_tiny_model("llama", "xs", seed=0)
    with pytest.raises(ValueError, match="args: MARLHFTrainer takes a MARLHFConfig"):
        MARLHFTrainer(agents=[m], tokenizer=t, train_dataset=TRAIN, reward_func=ends_with_digit, args=MAGRPOConfig())
