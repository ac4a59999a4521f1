"""generate_completions on real tiny models: shapes, masks, EOS handling, determinism, side effects."""

from __future__ import annotations

import pytest
import torch

from engine.sampling.sampler import Generation, generate_completions
from tests.engine.sampling.sampling_fixtures import PROMPTS

SAMPLED = {"temperature": 1.0, "top_p": 1.0, "top_k": None}


def _sample(model, tokenizer, *, k: int = 4, n: int = 8, seed: int | None = 0, **kwargs) -> Generation:
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    settings = {**SAMPLED, **kwargs}
    return generate_completions(
        model, tokenizer, PROMPTS, num_generations=k, max_new_tokens=n, generator=generator, **settings
    )


@pytest.mark.parametrize("decoder", ["lean", "generate"])
def test_shapes_and_counts(llama, decoder: str) -> None:
    model, tokenizer = llama
    gen = _sample(model, tokenizer, k=4, n=8, decoder=decoder)
    prompt_lengths = [len(tokenizer(p)["input_ids"]) for p in PROMPTS]
    assert gen.prompt_ids.shape == (3, max(prompt_lengths))
    assert gen.prompt_mask.sum(dim=1).tolist() == prompt_lengths
    assert gen.completion_ids.shape == gen.completion_mask.shape
    assert gen.completion_ids.shape[0] == 12 and gen.completion_ids.shape[1] <= 8
    assert [len(t) for t in gen.texts] == [4, 4, 4]
    assert gen.num_tokens == int(gen.completion_mask.sum())
    ids, mask = gen.sequences()
    assert ids.shape == (12, gen.prompt_ids.shape[1] + gen.completion_ids.shape[1])
    assert torch.equal(ids[5, : gen.prompt_ids.shape[1]], gen.prompt_ids[1])  # row 5 = prompt 1, sample 1
    assert torch.equal(mask[:, -gen.completion_mask.shape[1] :], gen.completion_mask)


@pytest.mark.parametrize("decoder", ["lean", "generate"])
def test_everything_after_eos_is_masked_and_padded(eos_llama, decoder: str) -> None:
    model, tokenizer = eos_llama
    gen = _sample(model, tokenizer, k=4, n=16, seed=1, decoder=decoder)
    lengths = gen.completion_lengths.tolist()
    assert min(lengths) < 16 and max(lengths) == 16  # some stopped early, some ran to the limit
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    for row, length in enumerate(lengths):
        ids = gen.completion_ids[row].tolist()
        mask = gen.completion_mask[row].tolist()
        assert mask == [1] * length + [0] * (len(mask) - length)
        assert eos not in ids[: length - 1]
        if length < len(ids):
            assert ids[length - 1] == eos
            assert set(ids[length:]) == {pad}
    for p, texts in enumerate(gen.texts):
        for k, text in enumerate(texts):
            assert "<|endoftext|>" not in text and "<|pad|>" not in text
            row = p * gen.num_generations + k
            expected = tokenizer.decode(gen.completion_ids[row, : lengths[row]].tolist(), skip_special_tokens=True)
            assert text == expected


def test_same_generator_seed_same_samples_other_seed_other_samples(llama) -> None:
    model, tokenizer = llama
    a = _sample(model, tokenizer, seed=3)
    b = _sample(model, tokenizer, seed=3)
    c = _sample(model, tokenizer, seed=4)
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert not torch.equal(a.completion_ids, c.completion_ids)
    assert a.texts == b.texts


def test_samples_differ_across_k_and_the_global_rng_is_untouched(llama) -> None:
    model, tokenizer = llama
    torch.manual_seed(11)
    expected = torch.rand(2)
    torch.manual_seed(11)
    gen = _sample(model, tokenizer, k=4, n=8, seed=5)
    assert torch.equal(torch.rand(2), expected)
    assert len(set(gen.texts[0])) > 1


def test_a_generator_advances_so_repeated_calls_differ(llama) -> None:
    model, tokenizer = llama
    generator = torch.Generator().manual_seed(0)
    kwargs = {"num_generations": 2, "max_new_tokens": 8, "generator": generator, **SAMPLED}
    first = generate_completions(model, tokenizer, PROMPTS, **kwargs)
    second = generate_completions(model, tokenizer, PROMPTS, **kwargs)
    assert not torch.equal(first.completion_ids, second.completion_ids)


def test_greedy_repeats_one_completion_k_times(llama) -> None:
    model, tokenizer = llama
    gen = _sample(model, tokenizer, k=3, n=8, seed=None, do_sample=False)
    for texts in gen.texts:
        assert texts[0] == texts[1] == texts[2]


def test_training_mode_is_restored_and_no_graph_is_built(llama) -> None:
    model, tokenizer = llama
    model.train()
    gen = _sample(model, tokenizer)
    assert model.training
    assert not gen.completion_ids.requires_grad
    model.eval()
    _sample(model, tokenizer)
    assert not model.training


def test_token_id_prompts_match_string_prompts(llama) -> None:
    model, tokenizer = llama
    as_ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    a = _sample(model, tokenizer, seed=2)
    b = generate_completions(
        model,
        tokenizer,
        as_ids,
        num_generations=4,
        max_new_tokens=8,
        generator=torch.Generator().manual_seed(2),
        **SAMPLED,
    )
    assert torch.equal(a.completion_ids, b.completion_ids)


def test_lean_log_probs_match_a_full_forward(eos_llama) -> None:
    model, tokenizer = eos_llama
    gen = _sample(model, tokenizer, k=2, n=12, seed=1, temperature=0.7, top_k=20)
    ids, mask = gen.sequences()
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits.float()
    lp = logits.log_softmax(-1)[:, :-1].gather(2, ids[:, 1:, None]).squeeze(2)
    completion_lp = lp[:, gen.prompt_ids.shape[1] - 1 :] * gen.completion_mask
    assert gen.token_logprobs is not None
    assert torch.allclose(gen.token_logprobs, completion_lp, atol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_generations": 0}, "num_generations"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"decoder": "beam"}, "unknown decoder"),
    ],
)
def test_bad_settings_are_named(llama, kwargs: dict, message: str) -> None:
    model, tokenizer = llama
    settings = {"num_generations": 2, "max_new_tokens": 4, **SAMPLED, **kwargs}
    with pytest.raises(ValueError, match=message):
        generate_completions(model, tokenizer, PROMPTS, **settings)


def test_prompts_must_be_present_and_uniform(llama) -> None:
    model, tokenizer = llama
    with pytest.raises(ValueError, match="at least one prompt"):
        generate_completions(model, tokenizer, [], num_generations=2, max_new_tokens=4, **SAMPLED)
    with pytest.raises(TypeError, match="all strings or all token-id lists"):
        generate_completions(model, tokenizer, ["a", [1, 2]], num_generations=2, max_new_tokens=4, **SAMPLED)
