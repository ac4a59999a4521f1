"""The fast one-token decode step gives the model's own logits bit for bit, and only claims models it
reproduces."""

from __future__ import annotations

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.sampling.decoder import FastDecoder
from engine.sampling.sampler import generate_completions, left_pad
from tests.engine.sampling.sampling_fixtures import PROMPTS, eos_prone


def _in_dtype(model, tokenizer, dtype: torch.dtype):
    """The model's parameters in ``dtype``, its buffers (rotary frequencies) as they were, as
    ``from_pretrained(dtype=...)`` and rollout_dtype's sampling copies leave them."""
    for param in model.parameters():
        param.data = param.data.to(dtype)
    return model, tokenizer


def _step_by_step(model, prompts: list[list[int]], pad_id: int, steps: int = 6):
    """Greedy-decode ``steps`` tokens twice (model forward with its cache, and the fast step) and
    return both logit sequences."""
    ids, mask = left_pad(prompts, pad_id)
    positions = (mask.cumsum(1) - 1).masked_fill(mask == 0, 0)
    padded = not bool(mask.all())
    full = torch.cat([mask, torch.ones(len(prompts), steps, dtype=mask.dtype)], dim=1)
    model.eval()
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask if padded else None, position_ids=positions,
                    use_cache=True, logits_to_keep=1)
        cache = out.cache
        fast = FastDecoder(model, cache, len(prompts), ids.shape[1] + steps)
        tokens = out.logits[:, -1].argmax(-1, keepdim=True)
        pos = positions[:, -1:] + 1
        reference, ours = [], []
        for step in range(steps):
            attn = full[:, : ids.shape[1] + step + 1] if padded else None
            ref = model(input_ids=tokens, attention_mask=attn, position_ids=pos, cache=cache, use_cache=True,
                        logits_to_keep=1)
            cache = ref.cache
            reference.append(ref.logits[:, -1])
            ours.append(fast.step(tokens, pos, attn))
            tokens = ref.logits[:, -1].argmax(-1, keepdim=True)
            pos = pos + 1
    return reference, ours


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("padded", [False, True], ids=["same_length", "left_padded"])
def test_fast_step_logits_equal_the_model_forward(arch: str, padded: bool, dtype: torch.dtype) -> None:
    """Bit for bit on the CPU in float32 and in bfloat16 (rollout_dtype's sampling copies)."""
    model, tokenizer = _in_dtype(*build_tiny_model(arch, "xs", seed=3), dtype)
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12]] if padded else [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]
    reference, ours = _step_by_step(model, prompts, tokenizer.pad_token_id)
    for step, (ref, got) in enumerate(zip(reference, ours, strict=True)):
        assert torch.equal(ref, got), f"step {step}: max diff {(ref - got).abs().max().item()}"


def test_fast_step_handles_an_output_bias_and_grouped_query_attention() -> None:
    model, tokenizer = eos_prone("llama")  # lm_head with a bias; xs has 4 query heads on 2 kv heads
    assert model.config.num_attention_heads != model.config.num_key_value_heads
    reference, ours = _step_by_step(model, [[3, 4, 5, 6], [7, 8]], tokenizer.pad_token_id, steps=4)
    assert all(torch.equal(r, o) for r, o in zip(reference, ours, strict=True))


def test_supports_only_models_it_reproduces() -> None:
    llama, _ = build_tiny_model("llama", "xs")
    gpt2, _ = build_tiny_model("gpt2", "xs")
    llama.eval()
    assert FastDecoder.supports(llama)
    assert not FastDecoder.supports(gpt2.eval())
    llama.train()
    assert not FastDecoder.supports(llama)  # dropout and other training behaviour are not reproduced
    llama.eval()
    llama.config._attn_implementation = "eager"
    assert not FastDecoder.supports(llama)
    llama.config._attn_implementation = "sdpa"
    handle = llama.register_forward_hook(lambda module, args, output: output)
    assert not FastDecoder.supports(llama)  # a hook would be skipped
    handle.remove()
    assert FastDecoder.supports(llama)


def test_models_off_the_cpu_are_claimed_until_their_check_fails() -> None:
    from engine.sampling.decoder import check_fast_step, needs_check

    llama, _ = build_tiny_model("llama", "xs")
    llama = llama.eval().to("meta")  # any non-CPU device: kernels not known to be exact
    assert FastDecoder.supports(llama) and needs_check(llama) is True  # the lean decoder checks it first
    logits = torch.zeros(2, 5)
    assert not check_fast_step(llama, logits + 1.0, logits)  # the first step's logits disagreed
    assert not FastDecoder.supports(llama)


def test_a_replaced_projection_is_not_claimed() -> None:
    llama, _ = build_tiny_model("llama", "xs")
    llama.eval()

    class ScaledLinear(torch.nn.Linear):  # stands for a quantised or adapter-wrapped projection
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 2 * super().forward(x)

    old = llama.model.layers[1].mlp.up_proj
    replacement = ScaledLinear(old.in_features, old.out_features, bias=False)
    llama.model.layers[1].mlp.up_proj = replacement
    assert not FastDecoder.supports(llama)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_sampling_with_and_without_the_fast_step_is_identical(arch: str, dtype: torch.dtype) -> None:
    model, tokenizer = _in_dtype(*build_tiny_model(arch, "xs", seed=2), dtype)
    runs = []
    for fast in (True, False):
        generator = torch.Generator().manual_seed(77)
        runs.append(generate_completions(model, tokenizer, PROMPTS, num_generations=3, max_new_tokens=12,
                                         temperature=0.7, top_p=0.9, top_k=20, generator=generator,
                                         fast_decode=fast))
    fast_run, module_run = runs
    assert torch.equal(fast_run.completion_ids, module_run.completion_ids)
    assert torch.equal(fast_run.token_logprobs, module_run.token_logprobs)
    assert fast_run.texts == module_run.texts
