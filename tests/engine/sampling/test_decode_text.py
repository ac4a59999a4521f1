"""Completions decode to whole characters: a multi-byte character cut by the token limit is dropped,
never shown as U+FFFD, and nothing complete is altered (real byte-level and byte-fallback tokenizers)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, normalizers
from transformers import PreTrainedTokenizerFast

from engine.models.tiny import build_tiny_model, build_tiny_tokenizer
from engine.sampling.sampler import decode_completions, generate_completions, incomplete_tail_length

TEXT = "a café, 日本 and 🙂 ok"


@pytest.fixture(scope="module")
def byte_level() -> PreTrainedTokenizerFast:
    return build_tiny_tokenizer()


def _byte_fallback_tokenizer() -> PreTrainedTokenizerFast:
    """A SentencePiece-style tokenizer: Latin letters as pieces, every other character as byte tokens."""
    vocab = {"<unk>": 0, "</s>": 1} | {f"<0x{b:02X}>": 2 + b for b in range(256)}
    for piece in ["\u2581", *"abcdefghijklmnopqrstuvwxyz,", "\u2581a"]:
        vocab[piece] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("\u2581", "a")], unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="</s>")


def test_every_cut_of_a_byte_level_completion_keeps_exactly_its_whole_characters(byte_level) -> None:
    ids = byte_level.encode(TEXT, add_special_tokens=False)
    rows = [ids[:k] for k in range(1, len(ids) + 1)]
    assert any(byte_level.decode(row).endswith("\ufffd") for row in rows)  # the cuts this is about
    # Each byte-level token is one alphabet character per byte.
    sizes = [len(byte_level.convert_ids_to_tokens(i)) for i in ids]
    expected = [TEXT.encode()[:sum(sizes[:k])].decode("utf-8", "ignore") for k in range(1, len(ids) + 1)]
    assert decode_completions(byte_level, rows) == expected


def test_every_cut_of_a_byte_fallback_completion_keeps_exactly_its_whole_characters() -> None:
    tokenizer = _byte_fallback_tokenizer()
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    texts = decode_completions(tokenizer, [ids[:k] for k in range(1, len(ids) + 1)])
    assert "\ufffd" not in "".join(texts) and texts[-1] == TEXT
    # Each text is the longest whole-character prefix the tokens hold; "日" survives a cut right after it.
    assert all(TEXT.startswith(text) for text in texts)
    assert "a café, 日" in texts and texts == sorted(texts, key=len)


def test_complete_characters_and_invalid_bytes_in_the_middle_are_kept(byte_level) -> None:
    lead = byte_level.convert_tokens_to_ids("æ")  # 0xE6: the first byte of a three-byte character
    a = byte_level.convert_tokens_to_ids("a")
    eos = byte_level.eos_token_id
    generated_replacement = byte_level.encode("a\ufffd", add_special_tokens=False)  # bytes EF BF BD
    assert decode_completions(byte_level, [generated_replacement, [lead, a], [a, lead, lead], [a, lead, eos]]) == [
        "a\ufffd", "\ufffda", "a\ufffd", "a"]


def test_incomplete_tail_length_counts_only_a_valid_unfinished_character() -> None:
    assert [incomplete_tail_length(data) for data in (b"", b"ab", "日".encode(), "日".encode()[:2], b"\xf0\x9f\x99",
                                                      b"\xe6\xe6", b"\xed\xa0", b"\xe0\x80", b"\xf4\x90", b"\x80")] == [
        0, 0, 0, 2, 3, 1, 0, 0, 0, 0]


@given(st.text(min_size=1, max_size=6), st.integers(min_value=0, max_value=24))
def test_incomplete_tail_length_agrees_with_utf8_decoding_of_every_cut(text: str, cut: int) -> None:
    data = text.encode()[:cut]
    kept = data.decode("utf-8", "ignore").encode()
    assert incomplete_tail_length(data) == len(data) - len(kept)


def test_sampled_completions_cut_inside_a_character_show_no_replacement_character() -> None:
    """A tiny model that always emits the first byte of a three-byte character."""
    model, tokenizer = build_tiny_model("llama", "xs", seed=0)
    lead = tokenizer.convert_tokens_to_ids("æ")
    head = model.lm_head
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[lead] = 1e4
    model.lm_head = biased
    for decoder in ("lean", "generate"):
        gen = generate_completions(model, tokenizer, ["Hi", "def f():"], num_generations=2, max_new_tokens=3,
                                   temperature=1.0, top_p=1.0, top_k=None, decoder=decoder,
                                   generator=torch.Generator().manual_seed(0))
        assert gen.completion_ids.tolist() == [[lead] * 3] * 4
        # Two lone lead bytes are invalid and stay visible; the last one is a cut character: dropped.
        assert gen.texts == [["\ufffd\ufffd"] * 2] * 2
