"""LoRA agents sample through the fast token step, with the same tokens and log-probs as their
model forward, bit for bit; adapters the step does not reproduce (DoRA) fall back by themselves."""

from __future__ import annotations

import pytest
import torch

from engine.lora import LoraSettings, attach_lora
from engine.models.tiny import build_tiny_model
from engine.sampling.decoder import FastDecoder
from engine.sampling.sampler import generate_completions


def _trained_looking(agent) -> None:
    """Give every B a non-zero value, as training would (B starts at zero)."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        for name, p in agent.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_lora_agent_fast_step_equals_its_forward(arch) -> None:
    base, tok = build_tiny_model(arch, "xs", seed=0)
    agent = attach_lora(base, LoraSettings(rank=4, alpha=8.0, target_modules=("all-linear",)), seed=1)
    _trained_looking(agent)
    agent.eval()
    assert FastDecoder.supports(agent)
    runs = [generate_completions(agent, tok, ["Count to 3:", "Hello there, friend"], num_generations=3,
                                 max_new_tokens=10, temperature=1.0, top_p=1.0, top_k=0,
                                 generator=torch.Generator().manual_seed(7), fast_decode=fast) for fast in (True, False)]
    assert torch.equal(runs[0].completion_ids, runs[1].completion_ids)
    assert torch.equal(runs[0].token_logprobs, runs[1].token_logprobs)
    plain = generate_completions(base, tok, ["Count to 3:"], num_generations=3, max_new_tokens=10, temperature=1.0,
                                 top_p=1.0, top_k=0, generator=torch.Generator().manual_seed(7))
    assert not torch.equal(plain.token_logprobs, runs[0].token_logprobs[:3])  # the adapter is really applied


def test_unsupported_adapters_fall_back_to_the_forward() -> None:
    from peft import LoraConfig, get_peft_model

    base, _ = build_tiny_model("llama", "xs", seed=0)
    dora = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj"], use_dora=True)).get_base_model().eval()
    assert not FastDecoder.supports(dora)
