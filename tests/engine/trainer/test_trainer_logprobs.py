"""The update's padded forward computes the same token log-probs the sampler saw: packing (left-padded
prompts, right-padded completions, explicit positions) is exact for every architecture we accept."""

from __future__ import annotations

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.sampling import generate_completions
from engine.trainer.agents import AgentRuntime, GenerationSettings, unpack_generation


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_training_forward_matches_sampling_logprobs(arch: str) -> None:
    model, tok = build_tiny_model(arch, "xs", seed=0)
    prompts = ["Hi", "Count to ten please:", "A much longer prompt about two agents working together"]
    gen = generate_completions(model, tok, prompts, num_samples=2, max_new_tokens=10, temperature=1.0, top_p=1.0,
                               top_k=50, generator=torch.Generator().manual_seed(0))
    assert gen.token_logprobs is not None
    sampled, _ = unpack_generation(gen, len(prompts), 2)
    agent = AgentRuntime(index=0, name="a", model=model, tokenizer=tok, device=torch.device("cpu"), learning_rate=1.0,
                         generation=GenerationSettings(10, 1.0, 1.0, 50), formatter=None)
    prompt_ids = [sp.prompt_ids for sp in sampled for _ in range(2)]
    completion_ids = [c for sp in sampled for c in sp.completion_ids]
    batch = agent.pack(prompt_ids, completion_ids)
    model.eval()
    with torch.no_grad():
        logps, entropy = agent.forward_logprobs(batch, with_entropy=True)
    for row, ids in enumerate(completion_ids):
        n = len(ids)
        assert torch.allclose(logps[row, :n], gen.token_logprobs[row, :n], atol=1e-4), (arch, row)
        assert batch.completion_mask[row].sum() == n
    assert entropy is not None and bool((entropy >= 0).all())
