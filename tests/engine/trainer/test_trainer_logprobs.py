"""The update's padded forward computes the same token log-probs the sampler saw: packing (left-padded
prompts, right-padded completions, explicit positions) is exact for every architecture we accept."""

from __future__ import annotations

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.sampling.sampler import generate_completions
from engine.trainer.agents import AgentRuntime, GenerationSettings, unpack_generation


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_training_forward_matches_sampling_logprobs(arch: str) -> None:
    model, tok = build_tiny_model(arch, "xs", seed=0)
    prompts = ["Hi", "Count to ten please:", "A much longer prompt about two agents working together"]
    gen = generate_completions(model, tok, prompts, num_generations=2, max_new_tokens=10, temperature=1.0, top_p=1.0,
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


def _shapes_seen(model: torch.nn.Module) -> tuple[list[tuple[int, ...]], object]:
    seen: list[tuple[int, ...]] = []
    handle = model.register_forward_pre_hook(lambda mod, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)),
                                             with_kwargs=True)
    return seen, handle


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


LAYOUTS = {  # which prompt each of the four rows continues, and whether the rows are K-contiguous
    "grouped": ([0, 0, 1, 1], 2),
    "interleaved": ([0, 1, 0, 1], None),
    "unequal": ([0, 0, 0, 1], None),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_shared_prompts_are_encoded_once_with_the_packed_results(arch: str, layout: str) -> None:
    from dataclasses import replace

    from engine.trainer.agents import completion_logits, pack_sequences
    from engine.trainer.losses import token_logprobs

    model, _ = build_tiny_model(arch, "xs", seed=1)
    model.eval()  # GPT-2 has dropout; gradients flow in eval mode too
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    completions = [[20, 21, 22, 23], [24, 25], [26, 27, 28], [29]]  # two samples per prompt, ragged
    rows, repeats = LAYOUTS[layout]
    batch = pack_sequences([prompts[r] for r in rows], completions, pad_id=0, device=torch.device("cpu"))
    assert batch.prefix is not None and batch.prefix.row_prompt.tolist() == rows
    assert batch.prefix.repeats == repeats  # contiguous groups expand, others index
    results = {}
    for name, b in (("shared", batch), ("packed", replace(batch, prefix=None))):
        model.zero_grad(set_to_none=True)
        seen, handle = _shapes_seen(model)
        logps = token_logprobs(completion_logits(model, b, 4), b.completion_ids) * b.completion_mask
        (-logps.sum()).backward()
        handle.remove()
        results[name] = (logps.detach(), _grads(model), seen)
    shared, packed = results["shared"], results["packed"]
    assert shared[2][0][0] == 2 and shared[2][1] == (4, 3)  # each prompt once, then the completions
    assert packed[2] == [(4, 10)]
    assert torch.allclose(shared[0], packed[0], atol=1e-5)
    assert len(shared[1]) == len(packed[1])
    for got, want in zip(shared[1], packed[1], strict=True):
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)


def test_distinct_prompts_and_checkpointed_training_use_one_packed_forward() -> None:
    from engine.trainer.agents import completion_logits, pack_sequences

    model, _ = build_tiny_model("llama", "xs", seed=1)
    distinct = pack_sequences([[5, 6], [7, 8, 9]], [[1, 2], [3]], pad_id=0, device=torch.device("cpu"))
    assert distinct.prefix is None
    shared = pack_sequences([[5, 6], [5, 6]], [[1, 2], [3]], pad_id=0, device=torch.device("cpu"))
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()
    model.train()
    seen, handle = _shapes_seen(model)
    completion_logits(model, shared, 2).sum().backward()
    handle.remove()
    assert seen == [(2, 4)]


def test_moving_a_batch_moves_its_shared_prompts() -> None:
    from engine.trainer.agents import pack_sequences
    from engine.trainer.magrpo import _to_device

    batch = pack_sequences([[5, 6], [5, 6]], [[1, 2], [3]], pad_id=0, device=torch.device("cpu"))
    moved = _to_device(batch, torch.device("meta"))
    assert moved.input_ids.device.type == "meta" and moved.completion_mask.device.type == "meta"
    assert moved.prefix is not None
    assert {t.device.type for t in (moved.prefix.prompt_ids, moved.prefix.prompt_mask,
                                    moved.prefix.position_ids, moved.prefix.row_prompt)} == {"meta"}
    assert batch.prefix.prompt_ids.device.type == "cpu"  # the original is untouched
