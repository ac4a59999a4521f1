"""MADPOTrainer: collection, the schedule over pairs, reference anchoring, exact resume (mid-DPO and
mid-collection), and clear errors."""

from __future__ import annotations

import pytest
import torch

from engine.schema.configs import MAGRPOConfig
from engine.schema.preference_configs import MADPOConfig
from engine.sinks import MemorySink
from engine.sinks.base import BaseSink
from tests.engine.preference.pref_helpers import fast_config, make_trainer, weights


class StopOnAsk(BaseSink):
    """Asks to stop on the n-th ``should_stop`` (collection asks once per chunk of items)."""

    def __init__(self, n: int) -> None:
        self.asks, self.n = 0, n

    def should_stop(self) -> bool:
        self.asks += 1
        return self.asks >= self.n


def test_collection_then_dpo_steps_over_the_pairs() -> None:
    sink = MemorySink()
    trainer = make_trainer(fast_config(num_train_epochs=2, train_batch_size=3), sink=sink)
    result = trainer.train()
    pairs = len(trainer.pairs)
    assert 0 < pairs <= 4 * 2  # at most pairs_per_sample per item; ties give none
    assert all(p.winner_reward > p.loser_reward for p in trainer.pairs)
    steps_per_epoch = -(-pairs // 3)
    assert result.step == trainer.total_steps == 2 * steps_per_epoch
    assert result.env_step == 2 * 2 * pairs  # every pair trained twice, 2 environment steps each
    first = sink.steps[0].metrics
    assert first["pairs/total"] == pairs and first["perf/collect_s"] > 0
    assert all("pairs/total" not in s.metrics for s in sink.steps[1:])
    for s in sink.steps:
        assert s.metrics["agent/agent_0/loss"] > 0.0 and s.metrics["dpo/num_pairs"] >= 1
    winner, loser = sink.steps[0].episodes[:2]
    assert winner.turns[0].reward > loser.turns[0].reward
    assert winner.turns[0].advantage == -loser.turns[0].advantage > 0  # the signed reward gap


def _same_weights(a, b) -> None:
    for wa, wb in zip(weights(a), weights(b), strict=True):
        for key in wa:
            assert torch.equal(wa[key], wb[key]), key


def test_resumed_run_equals_uninterrupted_run(tmp_path) -> None:
    """Reference-anchored, random pair selection, stopped after two DPO steps and resumed. The
    reference is the initial policy: before the first update every anchored margin is 0 (the
    collection's reference forward and the update's agree), so the first loss is log 2."""
    config = dict(num_train_epochs=1, train_batch_size=2, checkpoint_interval=2, pair_selection="random",
                  reference_free=False)
    full_sink = MemorySink()
    full = make_trainer(fast_config(**config), sink=full_sink, output_dir=tmp_path / "full")
    full.train()
    assert full_sink.steps[0].metrics["dpo/joint_margin_mean"] == pytest.approx(0.0, abs=1e-4)
    assert full_sink.steps[0].metrics["dpo/loss"] == pytest.approx(0.693147, abs=1e-4)
    assert full_sink.steps[-1].metrics["dpo/joint_margin_mean"] != pytest.approx(0.0, abs=1e-3)
    first = make_trainer(fast_config(**config), sink=MemorySink(stop_after_steps=2), output_dir=tmp_path / "part")
    assert first.train().status == "stopped"
    resumed_sink = MemorySink()
    resumed = make_trainer(fast_config(**config), sink=resumed_sink)
    result = resumed.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / "checkpoint-2")
    assert result.status == "completed" and result.step == full.step > 2 and result.env_step == full.env_step
    _same_weights(full, resumed)
    assert [s.metrics["dpo/loss"] for s in full_sink.steps[2:]] == [s.metrics["dpo/loss"] for s in resumed_sink.steps]


def test_stop_during_collection_resumes_the_collection(tmp_path) -> None:
    """env_step counting reward evaluations (use_environment_step off) survives the stop too."""
    config = dict(num_train_epochs=1, pair_selection="random", use_environment_step=False, train_batch_size=4)
    full = make_trainer(fast_config(**config))
    assert full.train().env_step == 4 * 4  # 4 items x 4 joint candidates scored
    part = make_trainer(fast_config(**config), output_dir=tmp_path)
    result = part.train(sink=StopOnAsk(2))  # one chunk of two items collected, then stop
    assert result.status == "stopped" and result.step == 0 and part.collected_items == 2 and result.env_step == 8
    resumed = make_trainer(fast_config(**config))
    assert resumed.train(resume_from_checkpoint=tmp_path / "checkpoints" / "checkpoint-0").env_step == 16
    assert [p.to_state() for p in resumed.pairs] == [p.to_state() for p in full.pairs]
    _same_weights(full, resumed)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="num_turns: MADPO is single-turn"):
        MADPOConfig(num_turns=2)
    with pytest.raises(ValueError, match="preference_num_candidates"):
        MADPOConfig(preference_num_candidates=1)
    with pytest.raises(ValueError, match="args: MADPOTrainer takes a MADPOConfig"):
        make_trainer(MAGRPOConfig())
    with pytest.raises(ValueError, match="no preference pair: the 4 items"):
        make_trainer(fast_config(), reward_func=lambda c1, c2: [1.0]).train()
