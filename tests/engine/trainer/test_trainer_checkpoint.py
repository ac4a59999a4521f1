"""Checkpoints: atomic folders on schedule, exact resume, in-memory state round trip, save_model."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.models.tiny import build_tiny_model
from engine.sinks import MemorySink
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


def _team():
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    return [m1, m2], [t1, t2]


def _weights(trainer) -> list[dict]:
    return [{k: v.clone() for k, v in a.model.state_dict().items()} for a in trainer.agents]


@pytest.mark.slow
def test_resumed_run_equals_uninterrupted_run(tmp_path) -> None:
    config = dict(max_steps=4, num_turns=2, checkpoint_interval=2, shuffle=True, num_train_epochs=3)
    full_sink = MemorySink()
    full = make_trainer(_team(), fast_config(**config), sink=full_sink, output_dir=tmp_path / "full")
    full.train()

    first = make_trainer(_team(), fast_config(**config), sink=MemorySink(stop_after_steps=2),
                         output_dir=tmp_path / "part")
    assert first.train().status == "stopped"
    checkpoint = tmp_path / "part" / "checkpoints" / "checkpoint-2"
    resumed_sink = MemorySink()
    resumed = make_trainer(_team(), fast_config(**config), sink=resumed_sink, output_dir=tmp_path / "part")
    result = resumed.train(resume_from_checkpoint=checkpoint)
    assert result.status == "completed" and result.step == 4 and result.env_step == full.env_step
    for a, b in zip(_weights(full), _weights(resumed), strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key
    assert [s.metrics["train/reward_mean"] for s in full_sink.steps[2:]] == [
        s.metrics["train/reward_mean"] for s in resumed_sink.steps]


def test_a_completed_run_continued_from_its_checkpoint_equals_the_longer_run(tmp_path) -> None:
    """The final evaluation of a completed run samples, but after its checkpoint: a run continued
    from that checkpoint equals one that trained the whole way (sampled evaluation every 2 steps)."""
    config = dict(num_generations=2, eval_interval=2, eval_num_samples=1)
    longer = make_trainer(_team(), fast_config(max_steps=4, **config), eval_dataset=[{"prompt": "Count to 3:"}],
                          output_dir=tmp_path / "full")
    longer.train()
    short_sink = MemorySink()
    short = make_trainer(_team(), fast_config(max_steps=2, **config), eval_dataset=[{"prompt": "Count to 3:"}],
                         sink=short_sink, output_dir=tmp_path / "part")
    short.train()
    assert [step for step, _, m in short_sink.metrics if "eval/reward_mean" in m] == [0, 2]  # scheduled, final
    again_sink = MemorySink()
    again = make_trainer(_team(), fast_config(max_steps=2, **config), eval_dataset=[{"prompt": "Count to 3:"}],
                         sink=again_sink)
    again.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / "checkpoint-2")
    assert not any("eval/reward_mean" in m for _, _, m in again_sink.metrics)  # nothing new to evaluate
    continued = make_trainer(_team(), fast_config(max_steps=4, **config), eval_dataset=[{"prompt": "Count to 3:"}])
    continued.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / "checkpoint-2")
    for a, b in zip(_weights(longer), _weights(continued), strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_checkpoints_on_interval_with_total_limit(tmp_path) -> None:
    sink = MemorySink()
    trainer = make_trainer(_team(), fast_config(max_steps=3, checkpoint_interval=1, checkpoint_total_limit=2),
                           sink=sink, output_dir=tmp_path)
    trainer.train()
    assert [step for step, _ in sink.checkpoints] == [1, 2, 3]
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["checkpoint-2", "checkpoint-3"]  # oldest pruned, no temporary folders left


def test_state_dict_round_trip_restores_weights_and_counters() -> None:
    trainer = make_trainer(_team(), fast_config(max_steps=1))
    state = trainer.state_dict()
    trainer.train()
    assert trainer.step == 1
    trainer.load_state_dict(state)
    assert trainer.step == 0 and trainer.env_step == 0
    for agent, weights in zip(trainer.agents, state["models"], strict=True):
        for key, value in agent.model.state_dict().items():
            assert torch.equal(value, weights[key])


def test_loading_a_non_checkpoint_is_a_clear_error(tmp_path) -> None:
    trainer = make_trainer(_team(), fast_config())
    with pytest.raises(FileNotFoundError, match="not a checkpoint"):
        trainer.load_checkpoint(tmp_path)


def test_save_model_writes_reloadable_agent_folders(tmp_path) -> None:
    trainer = make_trainer(_team(), fast_config(max_steps=1))
    trainer.save_model(tmp_path)
    for i, agent in enumerate(trainer.agents):
        folder = tmp_path / f"agent_{i}"
        reloaded = AutoModelForCausalLM.from_pretrained(folder)
        for key, value in agent.model.state_dict().items():
            assert torch.equal(value, reloaded.state_dict()[key])
        assert (folder / "tokenizer_config.json").is_file()
