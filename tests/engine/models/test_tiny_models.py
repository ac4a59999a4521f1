"""Tiny built-in models: sizes, determinism, tokenizer behaviour, and a real save/load round trip."""

from __future__ import annotations

import pytest
import torch

from engine.models import load_agent
from engine.models.tiny import SIZES, build_tiny_model, build_tiny_tokenizer


def _n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_xs_models_have_a_few_hundred_thousand_parameters(arch: str) -> None:
    model, tokenizer = build_tiny_model(arch, "xs")
    assert model.config.model_type == arch
    assert 100_000 < _n_params(model) < 600_000
    assert model.config.vocab_size == len(tokenizer)


def test_sizes_grow_and_m_is_about_three_million() -> None:
    counts = [_n_params(build_tiny_model("llama", size)[0]) for size in SIZES]
    assert counts == sorted(counts)
    assert 2_000_000 < counts[-1] < 4_500_000


def test_same_seed_same_weights_different_seed_different_weights() -> None:
    a, _ = build_tiny_model("qwen2", "xs", seed=3)
    b, _ = build_tiny_model("qwen2", "xs", seed=3)
    c, _ = build_tiny_model("qwen2", "xs", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.parameters(), c.parameters(), strict=True))


def test_building_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model("llama", "xs", seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_tokenizer_encodes_any_text_and_has_special_tokens() -> None:
    tokenizer = build_tiny_tokenizer()
    text = "Hello, world! déjà vu ☃ 漢字 def f(x): return x**2"
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.eos_token == "<|endoftext|>"
    assert tokenizer.pad_token == "<|pad|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert tokenizer.padding_side == "left"
    batch = tokenizer(["a", "a much longer prompt"], padding=True)
    assert batch["attention_mask"][0][0] == 0  # left padded
    assert batch["input_ids"][0][0] == tokenizer.pad_token_id


def test_chat_template_formats_messages_with_a_generation_prompt() -> None:
    tokenizer = build_tiny_tokenizer()
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert (
        text
        == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tokenizer(text)["input_ids"]
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3  # special tokens stay whole


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_round_trip_through_a_local_folder(tmp_path, arch: str) -> None:
    model, tokenizer = build_tiny_model(arch, "xs", seed=1)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    loaded, loaded_tok = load_agent(str(tmp_path))
    assert type(loaded).__name__ == type(model).__name__
    for (name, p), q in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    prompt = "The team works"
    assert loaded_tok(prompt)["input_ids"] == tokenizer(prompt)["input_ids"]
    assert loaded_tok.pad_token_id == tokenizer.pad_token_id
    assert loaded_tok.padding_side == "left"
    assert loaded_tok.chat_template == tokenizer.chat_template
    ids = torch.tensor([tokenizer(prompt)["input_ids"]])
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
