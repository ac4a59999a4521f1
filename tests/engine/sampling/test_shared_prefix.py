"""Prompts sharing long token prefixes: each distinct prefix is encoded once and only the suffixes per
prompt (engine.sampling.decoder), and the samples are those of encoding every prompt in full: the same
tokens, log-probs within LOGP_TOLERANCE (see test_shared_prompt_cache.py for why a tolerance), on
Llama, Qwen2, GPT-2, Qwen3 and Mistral (and Phi3, Gemma, Olmo2), greedy and sampled, with and without the fast token step,
and through a two-turn training run whose turn-2 prompts repeat the turn-1 prompt."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import engine.sampling.decoder
import engine.sampling.sampler
from engine.models.tiny import build_tiny_model
from engine.sampling.decoder import MIN_SHARED_PREFIX, find_groups, plan_prefixes
from engine.sampling.sampler import generate_completions
from engine.sinks import MemorySink
from tests.engine.sampling.arch_models import build_arch_model
from tests.engine.sampling.test_shared_prompt_cache import SAMPLING, _assert_same
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


def _tokens(seed: int, n: int, tokenizer) -> list[int]:
    """``n`` random ordinary token ids (no EOS or pad)."""
    ids = torch.randint(10, len(tokenizer) - 10, (n,), generator=torch.Generator().manual_seed(seed)).tolist()
    special = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    return [t + 1 if t in special else t for t in ids]


def _prompts(tokenizer) -> list[list[int]]:
    """Two groups (a 40-token prefix with suffixes of 5 and 11 tokens and the bare prefix; a 50-token
    prefix with suffixes of 2 and 7) and one unrelated 9-token prompt, interleaved."""
    a, b = _tokens(1, 40, tokenizer), _tokens(2, 50, tokenizer)
    return [a + _tokens(3, 5, tokenizer), b + _tokens(4, 2, tokenizer), _tokens(5, 9, tokenizer),
            a + _tokens(6, 11, tokenizer), a, b + _tokens(7, 7, tokenizer)]


def _model(arch: str):
    if arch in ("llama", "qwen2", "gpt2"):
        return build_tiny_model(arch, "xs", seed=3)
    return build_arch_model(arch, seed=3, **({"sliding_window": None} if arch == "mistral" else {}))


def _sample(model, tokenizer, prompts, *, share: bool, do_sample: bool = True, fast_decode: bool = True,
            k: int = 4, max_new_tokens: int = 10):
    return generate_completions(model, tokenizer, prompts, num_generations=k, max_new_tokens=max_new_tokens,
                                do_sample=do_sample, generator=torch.Generator().manual_seed(11),
                                fast_decode=fast_decode, share_prompt_prefix=share, **SAMPLING)


def _forward_shapes(model, run) -> tuple[list[tuple[int, int]], Any]:
    """The (rows, tokens) of every base-model forward during ``run()``, and its result."""
    shapes: list[tuple[int, int]] = []
    handle = model.base_model.register_forward_pre_hook(
        lambda _module, args, kwargs: shapes.append(tuple((args[0] if args else kwargs["input_ids"]).shape)),
        with_kwargs=True)
    try:
        result = run()
    finally:
        handle.remove()
    return shapes, result


CASES = [(arch, fast, sampled) for arch in ("llama", "qwen2", "gpt2", "qwen3", "mistral")
         for fast in ((True, False) if arch != "gpt2" else (False,)) for sampled in (True, False)]
CASES += [(arch, False, True) for arch in ("phi3", "gemma", "olmo2")]  # the other _HEAD_ON_HIDDEN models


@pytest.mark.parametrize(("arch", "fast_decode", "do_sample"), CASES)
def test_shared_prefixes_sample_what_full_prompts_sample(arch: str, fast_decode: bool, do_sample: bool) -> None:
    model, tokenizer = _model(arch)
    prompts = _prompts(tokenizer)
    shared_shapes, shared = _forward_shapes(
        model, lambda: _sample(model, tokenizer, prompts, share=True, do_sample=do_sample, fast_decode=fast_decode))
    full_shapes, full = _forward_shapes(
        model, lambda: _sample(model, tokenizer, prompts, share=False, do_sample=do_sample, fast_decode=fast_decode))
    # prefixes: 39 tokens (capped so the bare prefix keeps a suffix token), 50, and the lone prompt's first
    # token; suffixes up to 12 tokens (the 40-token prefix's 11-token suffix and its last prefix token)
    assert shared_shapes[:2] == [(3, 50), (6, 12)]
    assert full_shapes[0] == (6, 57)
    _assert_same(shared, full)
    assert shared.completion_ids.shape[0] == len(prompts) * 4


def test_early_eos_with_shared_prefixes() -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=0)
    head = model.lm_head
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[tokenizer.eos_token_id] = 4.0
    model.lm_head = biased
    prompts = _prompts(tokenizer)
    shared, full = (_sample(model, tokenizer, prompts, share=s, max_new_tokens=16) for s in (True, False))
    _assert_same(shared, full)
    assert int(shared.completion_mask.sum()) < shared.completion_mask.numel()  # some rows stopped early


def test_short_prefixes_encode_every_prompt_in_full() -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=3)
    common = _tokens(1, MIN_SHARED_PREFIX - 1, tokenizer)
    prompts = [common + _tokens(2, 4, tokenizer), common + _tokens(3, 6, tokenizer)]
    shapes, _ = _forward_shapes(model, lambda: _sample(model, tokenizer, prompts, share=True))
    assert shapes[0] == (2, MIN_SHARED_PREFIX - 1 + 6)
    common = _tokens(1, MIN_SHARED_PREFIX, tokenizer)
    longer = [common + _tokens(2, 4, tokenizer), common + _tokens(3, 6, tokenizer)]
    shapes, _ = _forward_shapes(model, lambda: _sample(model, tokenizer, longer, share=True))
    assert shapes[0] == (1, MIN_SHARED_PREFIX)


def test_sliding_windows_encode_every_prompt_in_full() -> None:
    """A window shorter than prompt + completion would drop shared keys: the prompts are encoded in full."""
    model, tokenizer = build_arch_model("mistral", seed=3, sliding_window=16)
    prompts = _prompts(tokenizer)
    shapes, shared = _forward_shapes(model, lambda: _sample(model, tokenizer, prompts, share=True))
    assert shapes[0] == (6, 57)
    _assert_same(shared, _sample(model, tokenizer, prompts, share=False))


def test_half_precision_encodes_every_prompt_in_full() -> None:
    model, tokenizer = build_tiny_model("llama", "xs", seed=3)
    model.to(torch.bfloat16)
    shapes, _ = _forward_shapes(model, lambda: _sample(model, tokenizer, _prompts(tokenizer), share=True))
    assert shapes[0] == (6, 57)


def test_groups_follow_the_longest_profitable_prefixes() -> None:
    """A template every prompt shares, then two items each shared by two prompts: one group per item."""
    template, one, two = list(range(100, 140)), list(range(200, 260)), list(range(300, 360))
    seqs = [template + one + [1], template + two + [2], template + one + [3, 4], template + two + [5], [7, 8]]
    groups = sorted((sorted(members), n) for members, n in find_groups(seqs))
    assert groups == [([0, 2], 100), ([1, 3], 100), ([4], 0)]
    assert find_groups([template[:10] + [1], template[:10] + [2]]) == [([0], 0), ([1], 0)]


def test_the_layout_masks_every_pad() -> None:
    ids = torch.tensor([[0, 0, 5, 6, 7], [5, 6, 7, 8, 9], [0, 0, 0, 5, 6]])
    mask = (ids != 0).long()
    layout = plan_prefixes(ids, mask, pad_id=0, threshold=2)
    assert layout is not None
    full = torch.cat([layout.prefix_ids[layout.rows], layout.suffix_ids], dim=1)
    assert [row[keep.bool()].tolist() for row, keep in zip(full, layout.mask, strict=True)] == [
        [5, 6, 7], [5, 6, 7, 8, 9], [5, 6]]
    assert layout.positions[1].tolist()[-5:] == [0, 1, 2, 3, 4]
    assert bool(layout.mask[:, -1].all())  # every row ends on a real token


def _train_two_turns(share: bool, monkeypatch: pytest.MonkeyPatch):
    calls, prefixed = [], []
    original = engine.sampling.decoder._prefill_prefixes

    def sample(*args, **kwargs):
        calls.append(generate_completions(*args, **kwargs, share_prompt_prefix=share))
        return calls[-1]

    def prefill_prefixes(model, layout, *args, **kwargs):
        prefixed.append(int(layout.rows.shape[0]))
        return original(model, layout, *args, **kwargs)

    monkeypatch.setattr(engine.sampling.sampler, "generate_completions", sample)
    monkeypatch.setattr(engine.sampling.decoder, "_prefill_prefixes", prefill_prefixes)
    data = [{"prompt": f"Two agents work together on this task and each of them explains one step. Item {i}: count to {i}:",
             "n": i} for i in range(4)]
    team = [build_tiny_model("llama", "xs", seed=0), build_tiny_model("gpt2", "xs", seed=1)]
    trainer = make_trainer(([m for m, _ in team], [t for _, t in team]),
                           fast_config(num_turns=2, num_generations=3, max_new_tokens=6, items_per_step=2,
                                       max_steps=1, clip_epsilon=0.2, parallel_training="none"),
                           train_dataset=data)  # agents in turn: the calls are recorded in one order
    trainer.train(sink=MemorySink())
    return calls, prefixed


def test_two_turn_training_samples_the_same_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    shared_calls, prefixed = _train_two_turns(True, monkeypatch)
    full_calls, none = _train_two_turns(False, monkeypatch)
    assert len(shared_calls) == len(full_calls) == 4  # 2 agents x 2 turns, both items in one call
    assert none == [] and sorted(prefixed) == [2, 2, 6, 6]  # both turns of both agents shared prefixes
    for a, b in zip(shared_calls, full_calls, strict=True):
        assert a.num_prompts in (2, 6) and torch.equal(a.prompt_ids, b.prompt_ids)
        _assert_same(a, b)
