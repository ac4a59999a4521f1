"""engine.comlrl: CoMLRL 1.4.3's public API over CoopLab's trainers (the fast checks; CoMLRL's own
suite runs through ``make conformance``)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

import engine
from engine.comlrl.trainers.actor_critic import IACConfig, MAACConfig
from engine.comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
from engine.comlrl.utils import RewardProcessors, read_checkpoint_metadata, set_reward_range
from engine.models.tiny import build_tiny_model
from engine.sampling.sampler import generate_completions

DATA = [{"prompt": "alpha"}, {"prompt": "beta"}]


def _config(**overrides):
    return MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=3, rollout_buffer_size=1, num_train_epochs=1,
                        eval_interval=0, agent_devices="cpu", seed=0, **overrides)


@pytest.fixture(scope="module")
def pair():
    return [build_tiny_model("llama", "xs", seed=s) for s in (0, 1)]


def test_engine_trainer_builds_without_train_dataset_and_train_names_it(pair) -> None:
    trainer = engine.MAGRPOTrainer(agents=[m for m, _ in pair], tokenizer=[t for _, t in pair],
                                   reward_func=lambda a, b: [0.0], args=_config())
    with pytest.raises(ValueError, match="requires a train_dataset"):
        trainer.train()


def test_compat_trainer_shows_models_optimizers_and_tokenizers(pair) -> None:
    models, tokenizers = [m for m, _ in pair], [t for _, t in pair]
    trainer = MAGRPOTrainer(agents=models, tokenizer=tokenizers, reward_func=lambda a, b: [0.0], args=_config())
    assert trainer.agents == models and trainer.tokenizers == tokenizers
    firsts = [optimizer.param_groups[0]["params"][0] for optimizer in trainer.optimizers]
    assert all(p is next(m.parameters()) for p, m in zip(firsts, models, strict=True))
    assert trainer.reference_models == [] and trainer.model_name == "llama"
    assert trainer.wandb_initialized is False and trainer.verbose is True
    with pytest.raises(ValueError, match="^Trainer: training requires a train_dataset.$"):
        trainer.train()


def test_reward_sees_comlrl_prompts_and_any_first_parameter_name(pair) -> None:
    seen = []

    def reward(task_prompts, first, second, *, batch_items=None):  # CoMLRL: f(prompts, c1, c2) by position
        seen.append((list(task_prompts), len(first), len(second), batch_items))
        return [1.0]

    trainer = MAGRPOTrainer(agents=[m for m, _ in pair], tokenizer=[t for _, t in pair], train_dataset=DATA,
                            reward_func=reward, formatters=[lambda x: f"A: {x['prompt']}", lambda x: "B"],
                            args=_config(max_steps=1))
    trainer.train()
    assert seen and all(p == ["A: alpha"] and n1 == n2 == 1 and items == [DATA[0]] for p, n1, n2, items in seen)


def test_a_patched_generate_is_what_samples() -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=2)
    calls = []
    eos = tokenizer.eos_token_id

    def generate(*, input_ids, num_return_sequences, **kwargs):
        calls.append((input_ids.shape[0], num_return_sequences, kwargs["return_dict_in_generate"]))
        tail = torch.tensor([[5, 6, eos]] * num_return_sequences)
        return SimpleNamespace(sequences=torch.cat([input_ids.repeat(num_return_sequences, 1), tail], dim=1))

    model.generate = generate
    gen = generate_completions(model, tokenizer, ["one", "two two"], num_generations=2, max_new_tokens=4,
                               temperature=1.0, top_p=1.0, top_k=None, generator=torch.Generator().manual_seed(0))
    assert calls == [(1, 2, True), (1, 2, True)]  # one unpadded prompt per call, as CoMLRL calls it
    assert gen.completion_ids[:, :3].tolist() == [[5, 6, eos]] * 4 and gen.num_tokens == 12


def test_reward_processors_default_to_no_change() -> None:
    assert RewardProcessors.scale()(3.0) == RewardProcessors.shift()(3.0) == 3.0
    assert engine.RewardProcessors.scale(2)(3.0) == 6.0


@pytest.mark.parametrize(("make", "match"), [
    (lambda: MAGRPOConfig(reference_kl_enabled=True, reference_devices=["cpu"] * 3), "reference_devices length"),
    (lambda: IACConfig(parallel_training="mp", agent_devices="cpu"), "critic_devices"),
    (lambda: MAACConfig(parallel_training="mp", agent_devices="cpu"), "critic_devices"),
])
def test_configs_refuse_what_comlrl_refuses(make, match) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_reward_range_is_declared_on_the_function() -> None:
    def reward(a, b):
        return [0.0]

    assert set_reward_range(reward, 0, 2) is reward and reward.reward_range == (0.0, 2.0)
    with pytest.raises(ValueError, match="minimum must be less than maximum"):
        set_reward_range(reward, 2, 1)


def test_checkpoint_metadata_of_a_cooplab_checkpoint(pair, tmp_path) -> None:
    trainer = MAGRPOTrainer(agents=[m for m, _ in pair], tokenizer=[t for _, t in pair], train_dataset=DATA,
                            reward_func=lambda a, b: [0.0], args=_config())
    folder = trainer.save_checkpoint(tmp_path / "checkpoint-0")
    meta = read_checkpoint_metadata(folder)
    assert meta["sequence"] == 0 and meta["wandb"] is None
    assert read_checkpoint_metadata(folder / "meta.json") == meta
    (folder / "meta.json").write_text(json.dumps({"model_of_agent": [0, 1], "step": -1}))
    with pytest.raises(ValueError, match="no valid step"):
        read_checkpoint_metadata(folder)
