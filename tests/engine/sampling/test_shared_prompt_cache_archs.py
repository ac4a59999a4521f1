"""The shared prompt cache on the architectures added after Llama/Qwen2/GPT-2 (Mistral, Qwen3, Phi3,
Gemma, Olmo2), sliding windows included: each prompt is encoded once (P rows) and the samples are
those of encoding K copies (the same tokens, log-probs within LOGP_TOLERANCE; see
test_shared_prompt_cache.py for why a tolerance), single-turn and through a two-turn training run."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import engine.sampling.sampler
from engine.sampling.sampler import generate_completions
from engine.sinks import MemorySink
from tests.engine.sampling.arch_models import build_arch_model
from tests.engine.sampling.sampling_fixtures import PROMPTS
from tests.engine.sampling.test_shared_prompt_cache import SAMPLING, _assert_same
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer

WINDOW = 4  # shorter than the prompts (up to 8 tokens) and the completions (12)

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "mistral": ("mistral", {"sliding_window": None}),
    "mistral_default_window": ("mistral", {}),  # 4096 positions
    "mistral_window": ("mistral", {"sliding_window": WINDOW}),
    "qwen3": ("qwen3", {}),
    "qwen3_window_layers": ("qwen3", {"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 1}),
    "phi3": ("phi3", {}),
    "phi3_window": ("phi3", {"sliding_window": WINDOW}),
    "gemma": ("gemma", {}),
    "olmo2": ("olmo2", {}),
}


def _sample(model, tokenizer, *, share: bool, fast_decode: bool = True, k: int = 4):
    return generate_completions(model, tokenizer, PROMPTS, num_generations=k, max_new_tokens=12,
                                generator=torch.Generator().manual_seed(7), fast_decode=fast_decode,
                                share_prompt_cache=share, **SAMPLING)


def _first_forward_rows(model, tokenizer, *, share: bool, fast_decode: bool) -> tuple[int, Any]:
    """The rows of the base model's first forward in a sampling call, and the call's samples."""
    rows: list[int] = []
    handle = model.model.register_forward_pre_hook(
        lambda _module, args, kwargs: rows.append(int((args[0] if args else kwargs["input_ids"]).shape[0])),
        with_kwargs=True)
    try:
        samples = _sample(model, tokenizer, share=share, fast_decode=fast_decode)
    finally:
        handle.remove()
    return rows[0], samples


# the fast token step takes Qwen3 and Mistral (within the window); the others always use their forward
RUNS = [(case, True) for case in CASES] + [(case, False) for case, (arch, _) in CASES.items()
                                           if arch in ("qwen3", "mistral")]


@pytest.mark.parametrize(("case", "fast_decode"), RUNS)
def test_shared_prompt_cache_samples_what_k_copies_sample(case: str, fast_decode: bool) -> None:
    arch, overrides = CASES[case]
    model, tokenizer = build_arch_model(arch, seed=3, **overrides)
    shared_rows, shared = _first_forward_rows(model, tokenizer, share=True, fast_decode=fast_decode)
    copies_rows, copies = _first_forward_rows(model, tokenizer, share=False, fast_decode=fast_decode)
    assert (shared_rows, copies_rows) == (len(PROMPTS), 4 * len(PROMPTS))  # the prompts were encoded once
    _assert_same(shared, copies)


@pytest.mark.parametrize("arch", ["mistral", "phi3"])
def test_the_sliding_window_is_exercised(arch: str) -> None:
    """The windowed cases above really drop keys: the same weights without a window sample otherwise."""
    windowed, tokenizer = build_arch_model(arch, seed=3, sliding_window=WINDOW)
    full, _ = build_arch_model(arch, seed=3, sliding_window=None)
    assert not torch.equal(_sample(windowed, tokenizer, share=True).token_logprobs,
                           _sample(full, tokenizer, share=True).token_logprobs)


def _train_two_turns(share: bool, monkeypatch: pytest.MonkeyPatch):
    calls = []

    def sample(*args, **kwargs):
        calls.append(generate_completions(*args, **kwargs, share_prompt_cache=share))
        return calls[-1]

    monkeypatch.setattr(engine.sampling.sampler, "generate_completions", sample)
    team = [build_arch_model("qwen3", seed=0), build_arch_model("mistral", seed=1, sliding_window=WINDOW)]
    trainer = make_trainer(([m for m, _ in team], [t for _, t in team]),
                           fast_config(num_turns=2, num_generations=3, max_new_tokens=6, items_per_step=2,
                                       max_steps=1, clip_epsilon=0.2,  # sampled log-probs enter the loss
                                       parallel_training="none"))  # agents in turn: calls recorded in one order
    trainer.train(sink=MemorySink())
    return calls


def test_two_turn_training_samples_the_same_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    shared_calls = _train_two_turns(True, monkeypatch)
    copies_calls = _train_two_turns(False, monkeypatch)
    assert len(shared_calls) == len(copies_calls) == 4  # 2 agents x 2 turns, both items in one call
    for a, b in zip(shared_calls, copies_calls, strict=True):
        assert a.num_prompts in (2, 6) and torch.equal(a.prompt_ids, b.prompt_ids)
        _assert_same(a, b)
