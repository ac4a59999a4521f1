"""The fast token step where its exactness is not known (a GPU): checked once against the model's
forward, kept within the stated tolerance, refused otherwise. The CPU is where it is exact, so these
tests take the CPU off the exact list to run the check."""

from __future__ import annotations

import logging

import pytest
import torch

import engine.sampling.decoder as fsc
from engine.models.tiny import build_tiny_model
from engine.sampling.decoder import FastDecoder
from engine.sampling.sampler import generate_completions
from tests.engine.sampling.sampling_fixtures import PROMPTS

SAMPLING = {"temperature": 0.8, "top_p": 0.9, "top_k": 50}


@pytest.fixture
def unverified_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsc, "EXACT_DEVICE_TYPES", set())


def _sample(model, tokenizer, *, fast_decode: bool = True):
    return generate_completions(model, tokenizer, PROMPTS, num_generations=3, max_new_tokens=10, fast_decode=fast_decode,
                                generator=torch.Generator().manual_seed(3), **SAMPLING)


def _count_fast_steps(monkeypatch: pytest.MonkeyPatch, shift: float = 0.0) -> list[int]:
    """Count FastDecoder.step calls (and shift its logits by ``shift``, a wrong fast step)."""
    calls = []
    original = FastDecoder.step

    def step(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs) + shift

    monkeypatch.setattr(FastDecoder, "step", step)
    return calls


def test_on_the_cpu_nothing_is_checked() -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=0)
    assert fsc.needs_check(model) is None and fsc.fast_step_kept(model)
    _sample(model, tokenizer)
    assert fsc.fast_step_verdicts(model) == {}


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_fast_step_within_tolerance_is_kept_and_samples_as_before(unverified_cpu, arch: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    model, tokenizer = build_tiny_model(arch, "xs", seed=1)
    assert fsc.needs_check(model) is True
    calls = _count_fast_steps(monkeypatch)
    checked = _sample(model, tokenizer)
    verdicts = fsc.fast_step_verdicts(model)
    assert list(verdicts) == ["cpu/float32"]
    verdict = verdicts["cpu/float32"]
    assert verdict["kept"] and verdict["max_difference"] == 0.0 and verdict["allowed"] >= 1e-4  # exact on a CPU
    assert len(calls) == 9  # every step after the prompt's (10 tokens: 9 steps), the first one checked
    reference = _sample(model, tokenizer, fast_decode=False)
    assert torch.equal(checked.completion_ids, reference.completion_ids)
    assert torch.equal(checked.token_logprobs, reference.token_logprobs)
    assert fsc.needs_check(model) is False and fsc.fast_step_kept(model)  # the next call skips the check
    calls.clear()
    _sample(model, tokenizer)
    assert len(calls) == 9


def test_a_fast_step_out_of_tolerance_is_refused_with_a_warning(unverified_cpu, monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=2)
    calls = _count_fast_steps(monkeypatch, shift=0.5)  # a fast step that computes something else
    with caplog.at_level(logging.WARNING, logger="engine.sampling.decoder"):
        refused = _sample(model, tokenizer)
    verdict = fsc.fast_step_verdicts(model)["cpu/float32"]
    assert not verdict["kept"] and verdict["max_difference"] == pytest.approx(0.5, abs=1e-5)
    assert "fast token step off for LlamaForCausalLM on cpu (float32)" in caplog.text
    assert len(calls) == 1  # only the checked step ran the fast path; the rest went through the forward
    reference = _sample(model, tokenizer, fast_decode=False)
    assert torch.equal(refused.completion_ids, reference.completion_ids)
    assert torch.equal(refused.token_logprobs, reference.token_logprobs)
    assert not FastDecoder.supports(model)  # refused for this device and dtype from now on
    calls.clear()
    _sample(model, tokenizer)
    assert calls == []


def test_a_nan_from_the_fast_step_is_refused(unverified_cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=2)
    _count_fast_steps(monkeypatch, shift=float("nan"))
    _sample(model, tokenizer)
    assert not fsc.fast_step_verdicts(model)["cpu/float32"]["kept"]


def test_bfloat16_is_checked_with_its_own_tolerance(unverified_cpu) -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=3)
    model = model.to(torch.bfloat16)
    _sample(model, tokenizer)
    verdict = fsc.fast_step_verdicts(model)["cpu/bfloat16"]
    assert verdict["kept"] and verdict["allowed"] >= 2.0**-5


def test_the_tolerance_scales_with_the_logits() -> None:
    model, _ = build_tiny_model("llama", "xs", seed=0)
    forward = torch.tensor([[20.0, -3.0]])
    assert fsc.check_fast_step(model, forward + 1.9e-3, forward)  # 1e-4 * 20 = 2e-3 allowed
    assert not fsc.check_fast_step(model, forward + 2.1e-3, forward)
    small = torch.tensor([[0.5, -0.2]])
    assert fsc.check_fast_step(model, small + 0.9e-4, small)  # at least 1e-4 * 1
    assert not fsc.check_fast_step(model, small + 1.1e-4, small)
