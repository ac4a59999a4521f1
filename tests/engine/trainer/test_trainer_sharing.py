"""Parameter sharing: one model object for two agents keeps one copy of the weights and gradients,
two optimizer states, and both agents' updates reach the shared weights."""

from __future__ import annotations

import torch

from engine import MAGRPOTrainer
from engine.models.tiny import build_tiny_model
from tests.engine.trainer.trainer_helpers import DATA, changed, fast_config, length_reward, snapshot


def _unique_parameter_bytes(trainer: MAGRPOTrainer) -> int:
    seen, total = set(), 0
    for agent in trainer.agents:
        for p in agent.model.parameters():
            if p.data_ptr() not in seen:
                seen.add(p.data_ptr())
                total += p.numel() * p.element_size()
    return total


def test_shared_model_halves_weight_memory_and_keeps_two_optimizers() -> None:
    model, tok = build_tiny_model("llama", "xs", seed=0)
    shared = MAGRPOTrainer(agents=[model, model], tokenizer=tok, train_dataset=DATA, reward_func=length_reward,
                           args=fast_config())
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, _ = build_tiny_model("llama", "xs", seed=0)
    separate = MAGRPOTrainer(agents=[m1, m2], tokenizer=t1, train_dataset=DATA, reward_func=length_reward,
                             args=fast_config())
    assert _unique_parameter_bytes(shared) * 2 == _unique_parameter_bytes(separate)
    assert shared.agents[0].model is shared.agents[1].model
    assert shared.agents[0].optimizer is not shared.agents[1].optimizer

    # one update step per agent, checking the weights after each agent's step
    rollout = shared.rollout([DATA[0], DATA[1]], [0, 1])
    from engine.trainer.magrpo import agent_batch, batch_advantages, optimize_agent

    before = snapshot(model)
    for agent in shared.agents:
        batch = agent_batch(agent.index, [rollout])
        advantages = batch_advantages(batch.returns, batch.groups, mode="mean", normalize=True,
                                      per_agent_normalization=False)
        samples = batch.samples
        for sample, advantage in zip(samples, advantages, strict=True):
            sample.advantage = advantage
        step_before = snapshot(model)
        optimize_agent(agent, samples, shared.update_settings, shared.update_rngs[agent.index])
        assert changed(step_before, model), f"{agent.name}'s update did not reach the shared weights"
    assert changed(before, model)
    # each agent has its own AdamW moments over the same tensors
    p = next(model.parameters())
    s0 = shared.agents[0].optimizer.state[p]
    s1 = shared.agents[1].optimizer.state[p]
    assert int(s0["step"]) == int(s1["step"]) == 1
    assert not torch.equal(s0["exp_avg"], s1["exp_avg"])


def test_shared_team_trains_end_to_end_and_checkpoints_one_model(tmp_path) -> None:
    model, tok = build_tiny_model("qwen2", "xs", seed=2)
    trainer = MAGRPOTrainer(agents=[model, model], tokenizer=tok, train_dataset=DATA, reward_func=length_reward,
                            args=fast_config(), output_dir=tmp_path)
    result = trainer.train()
    files = sorted(p.name for p in (tmp_path / "checkpoints" / f"checkpoint-{result.step}").iterdir())
    assert files == ["meta.json", "model_0.safetensors", "trainer_state.pt"]
