"""engine.comlrl's IAC/MAAC: critics and value heads under CoMLRL's names, CoMLRL's save_model layout
(and a saved folder loading back through CoMLRL's constructor), RolloutSamples for metrics_callback."""

from __future__ import annotations

import pytest
import torch

from engine.actor_critic.critics import ValueHead
from engine.comlrl._critics import comlrl_head_state, cooplab_head_state
from engine.comlrl.trainers.actor_critic import IACConfig, IACTrainer, MAACConfig, MAACTrainer, RolloutSample
from engine.models.tiny import build_tiny_model
from engine.sinks.memory import MemorySink

DATA = [{"prompt": "alpha"}, {"prompt": "beta"}]


def _args(cls, **overrides):
    values = dict(num_turns=1, num_generations=1, max_new_tokens=3, rollout_buffer_size=2, num_train_epochs=1,
                  eval_interval=0, agent_devices="cpu", seed=0)
    return cls(**{**values, **overrides})


@pytest.fixture(scope="module")
def team():
    return [build_tiny_model("llama", "xs", seed=s) for s in (0, 1)]


def test_value_head_keys_are_comlrl_names_both_ways() -> None:
    plain, hidden = ValueHead(8), ValueHead(8, 1, 4)
    assert sorted(comlrl_head_state(plain)) == ["value_projection.bias", "value_projection.weight"]
    assert sorted(comlrl_head_state(hidden)) == ["pre_projection.0.bias", "pre_projection.0.weight",
                                                 "value_projection.bias", "value_projection.weight"]
    back = cooplab_head_state(hidden, comlrl_head_state(hidden))
    assert all(torch.equal(back[k], v) for k, v in hidden.state_dict().items()) and len(back) == 4
    with pytest.raises(ValueError, match="pre_projection.0.weight.*value_head_hidden_dim"):
        cooplab_head_state(plain, comlrl_head_state(hidden))


def test_iac_saves_comlrl_layout_and_loads_it_back(team, tmp_path) -> None:
    models, tokenizers = [m for m, _ in team], [t for _, t in team]
    trainer = IACTrainer(agents=models, critics=models, tokenizer=tokenizers, reward_func=lambda a, b: [1.0],
                         args=_args(IACConfig))
    assert [type(c.model).__name__ for c in trainer.critics] == ["LlamaModel"] * 2
    trainer.critics[1].value_head.value_projection.bias.data.fill_(0.25)
    trainer.save_model(str(tmp_path))
    for i in (0, 1):
        assert (tmp_path / f"agent_{i}" / "config.json").is_file()
        assert (tmp_path / f"agent_{i}" / "critic" / "config.json").is_file()
        state = torch.load(tmp_path / f"agent_{i}" / "critic" / "value_head.pt", weights_only=True)
        assert sorted(state) == ["value_projection.bias", "value_projection.weight"]
    again = IACTrainer(agents=[str(tmp_path / f"agent_{i}") for i in (0, 1)],
                       critics=[str(tmp_path / f"agent_{i}" / "critic") for i in (0, 1)],
                       tokenizer=tokenizers, reward_func=lambda a, b: [1.0], args=_args(IACConfig))
    for i in (0, 1):  # CoMLRL's recipe: the heads come back from value_head.pt
        again.critics[i].value_head.load_state_dict(
            torch.load(tmp_path / f"agent_{i}" / "critic" / "value_head.pt", weights_only=True))
    assert float(again.critics[1].value_head.value_projection.bias) == 0.25
    saved = trainer.critics[0].model.state_dict()
    assert all(torch.equal(saved[k], v) for k, v in again.critics[0].model.state_dict().items())


def test_iac_shared_head_and_maac_critic_folders(team, tmp_path) -> None:
    models, tokenizers = [m for m, _ in team], [t for _, t in team]
    shared = IACTrainer(agents=models, tokenizer=tokenizers, reward_func=lambda a, b: [1.0],
                        args=_args(IACConfig, use_separate_critic=False))
    assert shared.agents[0].model is models[0] and shared.agents[0].config is models[0].config
    shared.agents[1].value_head.value_projection.bias.data.fill_(0.5)
    shared.save_model(str(tmp_path / "iac"))
    assert (tmp_path / "iac" / "agent_1" / "value_head.pt").is_file()
    shared.agents[1].value_head.value_projection.bias.data.fill_(0.0)
    shared.agents[1].value_head.load_state_dict(torch.load(tmp_path / "iac" / "agent_1" / "value_head.pt"))
    assert float(shared.value_heads[1].net[-1].bias) == 0.5  # CoMLRL's restore reaches CoopLab's head
    assert not (tmp_path / "iac" / "agent_1" / "critic").exists()
    maac = MAACTrainer(agents=models, critic_model=models[0], tokenizer=tokenizers, reward_func=lambda a, b: [1.0],
                       args=_args(MAACConfig))
    maac.save_model(str(tmp_path / "maac"))
    assert (tmp_path / "maac" / "critic" / "value_head.pt").is_file() and maac.agents[0].value_head is None
    assert (tmp_path / "maac" / "agent_0" / "tokenizer.json").is_file()
    assert not list((tmp_path / "maac").glob("critic_*.pt"))


def test_metrics_callback_gets_rollout_samples_per_item(team) -> None:
    models, tokenizers = [m for m, _ in team], [t for _, t in team]
    calls = []

    def callback(rollouts):
        calls.append(rollouts)
        return {"length": float(sum(r.response_len for r in rollouts)), "note": "not a number"}

    trainer = IACTrainer(agents=models, critics=models, tokenizer=tokenizers, reward_func=lambda a, b: [0.5],
                         eval_dataset=DATA, metrics_callback=callback, args=_args(IACConfig, eval_num_samples=2))
    metrics = trainer.evaluate()
    assert len(calls) == 2 and all(isinstance(r, RolloutSample) for r in calls[0])
    assert [(r.agent_idx, r.metadata["turn_idx"], r.metadata["batch_item"]) for r in calls[1]] == \
        [(0, 0, DATA[1]), (1, 0, DATA[1])]
    first = calls[0][0]
    assert float(first.reward) == 0.5 and first.full_input_ids.shape[0] == first.prompt_len + first.response_len
    assert metrics["eval/length"] == sum(sum(r.response_len for r in c) for c in calls) / 2
    assert "eval/note" not in metrics


@pytest.mark.slow  # trains a tiny team for a step
def test_metrics_callback_also_reports_on_training_steps(team) -> None:
    models, tokenizers = [m for m, _ in team], [t for _, t in team]
    seen = []

    def callback(rollouts):
        seen.append(len(rollouts))
        return {"domain/score": 2.0}

    sink = MemorySink()
    trainer = IACTrainer(agents=models, critics=models, tokenizer=tokenizers, reward_func=lambda a, b: [0.5],
                         train_dataset=DATA, metrics_callback=callback, args=_args(IACConfig, max_steps=1), sink=sink)
    trainer.train()
    assert seen and set(seen) == {2}  # per item: both agents' samples
    assert sink.steps[0].metrics["domain/score"] == 2.0
