"""Each prompt encoded once with its KV cache repeated to its K sample rows samples what encoding K
copies of the prompt samples: the same tokens, and log-probs equal within 1e-5 (LOGP_TOLERANCE), on
Llama, Qwen2 and GPT-2, with and without the fast token step, padded prompts, early EOS, and through
a two-turn training run.

Why a tolerance: the prompt's forward runs over P rows instead of P*K, and a CPU matrix product over
few rows (short prompts) may take another kernel that rounds the last bit differently; on longer
prompts (SmolLM2's, these tests' padded ones) the two are bit-identical. A 1-ulp change in a logit
moves a log-prob by ~5e-7."""

from __future__ import annotations

import pytest
import torch

import engine.sampling.sampler
from engine.models.tiny import build_tiny_model
from engine.sampling.sampler import generate_completions
from engine.sinks import MemorySink
from tests.engine.sampling.sampling_fixtures import PROMPTS, eos_prone
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer

LOGP_TOLERANCE = 1e-5
SAMPLING = {"temperature": 0.8, "top_p": 0.9, "top_k": 50}


def _sample(model, tokenizer, *, share: bool, fast_decode: bool = True, k: int = 4):
    return generate_completions(model, tokenizer, PROMPTS, num_generations=k, max_new_tokens=12,
                                generator=torch.Generator().manual_seed(7), fast_decode=fast_decode,
                                share_prompt_cache=share, **SAMPLING)


def _assert_same(a, b) -> None:
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert torch.equal(a.completion_mask, b.completion_mask)
    assert torch.allclose(a.token_logprobs, b.token_logprobs, rtol=0, atol=LOGP_TOLERANCE)
    assert a.texts == b.texts


@pytest.mark.parametrize(("arch", "fast_decode"), [("llama", True), ("llama", False), ("qwen2", True),
                                                   ("gpt2", False)])
def test_shared_prompt_cache_samples_what_k_copies_sample(arch: str, fast_decode: bool) -> None:
    model, tokenizer = build_tiny_model(arch, "xs", seed=3)
    shared = _sample(model, tokenizer, share=True, fast_decode=fast_decode)
    copies = _sample(model, tokenizer, share=False, fast_decode=fast_decode)
    _assert_same(shared, copies)
    assert shared.completion_ids.shape[0] == len(PROMPTS) * 4


def test_shared_prompt_cache_with_early_eos() -> None:
    model, tokenizer = eos_prone("llama")
    shared, copies = (_sample(model, tokenizer, share=s) for s in (True, False))
    _assert_same(shared, copies)
    assert int(shared.completion_mask.sum()) < shared.completion_mask.numel()  # some rows stopped early


def test_prompts_are_encoded_once_each() -> None:
    """The first forward of a sampling call sees P rows when shared and P*K when not."""
    model, tokenizer = build_tiny_model("gpt2", "xs", seed=3)
    rows: list[int] = []
    handle = model.transformer.register_forward_pre_hook(
        lambda _module, args, kwargs: rows.append(int((args[0] if args else kwargs["input_ids"]).shape[0])),
        with_kwargs=True)
    try:
        for share in (True, False):
            rows.clear()
            _sample(model, tokenizer, share=share, k=3)
            assert rows[0] == (len(PROMPTS) if share else 3 * len(PROMPTS))
            assert rows[1:] and set(rows[1:]) == {3 * len(PROMPTS)}  # every new token for all K rows
    finally:
        handle.remove()


def _train_two_turns(share: bool, monkeypatch: pytest.MonkeyPatch):
    calls = []

    def sample(*args, **kwargs):
        calls.append(generate_completions(*args, **kwargs, share_prompt_cache=share))
        return calls[-1]

    monkeypatch.setattr(engine.sampling.sampler, "generate_completions", sample)
    team = [build_tiny_model("llama", "xs", seed=0), build_tiny_model("gpt2", "xs", seed=1)]
    trainer = make_trainer(([m for m, _ in team], [t for _, t in team]),
                           fast_config(num_turns=2, num_generations=3, max_new_tokens=6, items_per_step=2,
                                       max_steps=1, clip_epsilon=0.2,  # sampled log-probs enter the loss
                                       parallel_training="none"))  # agents in turn: calls recorded in one order
    trainer.train(sink=MemorySink())
    return calls


def test_two_turn_training_samples_the_same_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # (parameters are not compared: AdamW's first step is ~lr * sign(grad), so a 1e-7 gradient
    # difference on a near-zero gradient moves a weight by up to 2 lr)
    shared_calls = _train_two_turns(True, monkeypatch)
    copies_calls = _train_two_turns(False, monkeypatch)
    assert len(shared_calls) == len(copies_calls) == 4  # 2 agents x 2 turns, both items in one call
    for a, b in zip(shared_calls, copies_calls, strict=True):
        assert a.num_prompts in (2, 6) and torch.equal(a.prompt_ids, b.prompt_ids)
        _assert_same(a, b)
