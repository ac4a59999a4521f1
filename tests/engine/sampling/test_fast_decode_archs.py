"""The fast token step on Qwen3 (RMSNorm of each query/key head) and Mistral (while its sliding window
holds every position): the model's own logits bit for bit, left-padded or not, with a plain LoRA
adapter too, the tokens ``generate`` samples; and no claim on a window it would overrun."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from engine.lora import LoraSettings, attach_lora
from engine.sampling.decoder import FastDecoder
from engine.sampling.sampler import generate_completions
from tests.engine.sampling.arch_models import build_arch_model
from tests.engine.sampling.sampling_fixtures import PROMPTS
from tests.engine.sampling.test_fast_decode import _step_by_step
from tests.engine.sampling.test_lean_decoder import SETTINGS

SAME_LENGTH = [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]
LEFT_PADDED = [[5, 6, 7, 8, 9], [10, 11, 12]]
STEPS = 6  # _step_by_step's default: the cache ends with 5 + 6 = 11 positions

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3": ("qwen3", {}),
    "qwen3_biased": ("qwen3", {"attention_bias": True}),
    "mistral": ("mistral", {"sliding_window": None}),
    "mistral_default_window": ("mistral", {}),  # 4096 positions
    "mistral_tightest_window": ("mistral", {"sliding_window": 5 + STEPS + 1}),
    "mistral_no_gqa": ("mistral", {"sliding_window": None, "num_key_value_heads": 4}),
}


def _assert_bit_identical(reference: list[torch.Tensor], ours: list[torch.Tensor]) -> None:
    assert len(reference) == STEPS
    for step, (ref, got) in enumerate(zip(reference, ours, strict=True)):
        assert torch.equal(ref, got), f"step {step}: max diff {(ref - got).abs().max().item()}"


@pytest.mark.parametrize("prompts", [SAME_LENGTH, LEFT_PADDED], ids=["same_length", "left_padded"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_step_logits_equal_the_model_forward(case: str, prompts: list[list[int]]) -> None:
    arch, overrides = CASES[case]
    model, tokenizer = build_arch_model(arch, seed=3, **overrides)
    assert FastDecoder.supports(model.eval(), 5 + STEPS)
    _assert_bit_identical(*_step_by_step(model, prompts, tokenizer.pad_token_id, steps=STEPS))


def test_a_mistral_window_the_completion_would_reach_is_not_claimed() -> None:
    model, _ = build_arch_model("mistral", seed=3, sliding_window=12)
    model.eval()
    assert FastDecoder.supports(model, 11)
    assert not FastDecoder.supports(model, 12)  # a key/value length equal to the window gets an explicit mask
    assert not FastDecoder.supports(model)  # no length given: only a window-free model is claimed
    unwindowed, _ = build_arch_model("mistral", seed=3, sliding_window=None)
    assert FastDecoder.supports(unwindowed.eval())


def test_qwen3_sliding_layers_and_replaced_head_norms_are_not_claimed() -> None:
    windowed, _ = build_arch_model("qwen3", use_sliding_window=True, sliding_window=4096, max_window_layers=1)
    assert not FastDecoder.supports(windowed.eval(), 11)
    model, _ = build_arch_model("qwen3")
    model.eval()
    assert FastDecoder.supports(model, 11)
    handle = model.model.layers[1].self_attn.k_norm.register_forward_hook(lambda module, args, output: output)
    assert not FastDecoder.supports(model, 11)  # a hook would be skipped
    handle.remove()
    model.model.layers[0].self_attn.q_norm = torch.nn.LayerNorm(16)  # computes something else
    assert not FastDecoder.supports(model, 11)


def _sample(model, tokenizer, *, fast_decode: bool = True, decoder: str = "lean", prompts=PROMPTS,
            max_new_tokens: int = 12, settings: dict | None = None):
    return generate_completions(model, tokenizer, prompts, num_generations=3, max_new_tokens=max_new_tokens,
                                generator=torch.Generator().manual_seed(77), fast_decode=fast_decode,
                                decoder=decoder, **(settings or SETTINGS["comlrl_defaults"]))


def _fast_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the fast token steps taken from now on."""
    calls: list[int] = []
    step = FastDecoder.step

    def counted(self, *args):
        calls.append(1)
        return step(self, *args)

    monkeypatch.setattr(FastDecoder, "step", counted)
    return calls


@pytest.mark.parametrize("setting", ["comlrl_defaults", "greedy"])
@pytest.mark.parametrize("case", ["qwen3", "mistral_default_window"])
def test_sampling_through_the_fast_step_matches_generate_and_the_forward(
        case: str, setting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    arch, overrides = CASES[case]
    model, tokenizer = build_arch_model(arch, seed=2, **overrides)
    steps = _fast_steps(monkeypatch)
    fast = _sample(model, tokenizer, settings=SETTINGS[setting])
    assert steps  # the fast step was taken
    steps.clear()
    forward = _sample(model, tokenizer, fast_decode=False, settings=SETTINGS[setting])
    reference = _sample(model, tokenizer, decoder="generate", settings=SETTINGS[setting])
    assert not steps
    assert bool((fast.prompt_mask == 0).any())  # the prompts are left-padded
    assert torch.equal(fast.completion_ids, forward.completion_ids)
    assert torch.equal(fast.token_logprobs, forward.token_logprobs)
    assert torch.equal(fast.completion_ids, reference.completion_ids)
    assert fast.texts == forward.texts == reference.texts


def test_mistral_samples_through_the_fast_step_only_while_its_window_holds_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    new_tokens = 10  # PROMPTS hold up to 8 tokens (checked below): the cache ends with 8 + 10 - 1 positions
    steps = _fast_steps(monkeypatch)
    for window, fast_expected in ((8 + new_tokens, True), (8 + new_tokens - 1, False)):
        model, tokenizer = build_arch_model("mistral", seed=2, sliding_window=window)
        steps.clear()
        fast = _sample(model, tokenizer, max_new_tokens=new_tokens)
        assert fast.prompt_ids.shape == (len(PROMPTS), 8)
        assert bool(steps) == fast_expected
        forward = _sample(model, tokenizer, fast_decode=False, max_new_tokens=new_tokens)
        assert torch.equal(fast.completion_ids, forward.completion_ids)
        assert torch.equal(fast.token_logprobs, forward.token_logprobs)


def _trained_looking(agent) -> None:
    """Give every B a non-zero value, as training would (B starts at zero)."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        for name, p in agent.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)


@pytest.mark.parametrize("case", ["qwen3", "mistral_default_window"])
def test_lora_agent_fast_step_equals_its_forward(case: str) -> None:
    arch, overrides = CASES[case]
    base, tokenizer = build_arch_model(arch, seed=0, **overrides)
    agent = attach_lora(base, LoraSettings(rank=4, alpha=8.0, target_modules=("all-linear",)), seed=1)
    _trained_looking(agent)
    agent.eval()
    assert FastDecoder.supports(agent, 11)
    _assert_bit_identical(*_step_by_step(agent, LEFT_PADDED, tokenizer.pad_token_id, steps=STEPS))
    fast, forward = (_sample(agent, tokenizer, fast_decode=f) for f in (True, False))
    assert torch.equal(fast.completion_ids, forward.completion_ids)
    assert torch.equal(fast.token_logprobs, forward.token_logprobs)
    plain = _sample(base, tokenizer)
    assert not torch.equal(plain.token_logprobs, fast.token_logprobs)  # the adapter is really applied
