"""Tiny random causal LMs with an in-process tokenizer: offline agents for tests and CPU demos.

``build_tiny_model`` builds a Llama, Qwen2 or GPT-2 from a small config with random weights and a
byte-level BPE tokenizer trained on the built-in corpus in a few milliseconds. Nothing is
downloaded. The pair behaves like a real checkpoint: it has eos/pad tokens, left padding, a chat
template, and round-trips through ``save_pretrained``/``from_pretrained``. Building is
deterministic for a seed and leaves the global RNG untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    LlamaConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

from engine.models.corpus import tiny_corpus

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [EOS_TOKEN, PAD_TOKEN, IM_START, IM_END]

# A ChatML-style template: every message becomes "<|im_start|>role\ncontent<|im_end|>\n".
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

ARCHS = ("llama", "qwen2", "gpt2")


@dataclass(frozen=True)
class TinySize:
    """Dimensions of one tiny model size."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int  # target BPE vocabulary (the trained tokenizer may come out a little smaller)


SIZES: dict[str, TinySize] = {
    "xs": TinySize(hidden=96, layers=2, heads=4, kv_heads=2, intermediate=256, vocab=1024),  # ~0.3 M
    "s": TinySize(hidden=128, layers=3, heads=4, kv_heads=2, intermediate=384, vocab=1024),  # ~0.9 M
    "m": TinySize(hidden=256, layers=4, heads=8, kv_heads=4, intermediate=640, vocab=1024),  # ~3 M
}

MAX_POSITIONS = 2048


def build_tiny_tokenizer(vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the built-in corpus (eos, pad, left padding, chat template).

    Training is deterministic: the same corpus and vocabulary size always give the same merges.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tiny_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START, IM_END],
        padding_side="left",
        model_max_length=MAX_POSITIONS,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def tiny_config(arch: str, size: str, tokenizer: PreTrainedTokenizerFast) -> PretrainedConfig:
    """The transformers config of a tiny model whose vocabulary matches ``tokenizer`` exactly."""
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny model arch {arch!r}; expected one of {list(ARCHS)}")
    if size not in SIZES:
        raise ValueError(f"unknown tiny model size {size!r}; expected one of {list(SIZES)}")
    dims = SIZES[size]
    special = {
        "vocab_size": len(tokenizer),
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    if arch == "gpt2":
        return GPT2Config(
            n_embd=dims.hidden,
            n_layer=dims.layers,
            n_head=dims.heads,
            n_inner=dims.intermediate,
            n_positions=1024,
            **special,
        )
    common = {
        "hidden_size": dims.hidden,
        "num_hidden_layers": dims.layers,
        "num_attention_heads": dims.heads,
        "num_key_value_heads": dims.kv_heads,
        "intermediate_size": dims.intermediate,
        "max_position_embeddings": MAX_POSITIONS,
        "tie_word_embeddings": False,
        **special,
    }
    if arch == "llama":
        return LlamaConfig(**common)
    return Qwen2Config(**common)


def build_tiny_model(
    arch: str = "llama", size: str = "xs", seed: int = 0
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A tiny random causal LM (``arch`` llama/qwen2/gpt2, ``size`` xs/s/m) and its tokenizer.

    The weights depend only on ``seed``; the global torch RNG is left as it was.
    """
    tokenizer = build_tiny_tokenizer(SIZES[size].vocab if size in SIZES else 1024)
    return seeded_model(tiny_config(arch, size, tokenizer), tokenizer, seed), tokenizer


def seeded_model(config: PretrainedConfig, tokenizer: PreTrainedTokenizerFast, seed: int) -> PreTrainedModel:
    """A causal LM from ``config`` with random weights from ``seed`` (the global torch RNG is left as it
    was), generating with ``tokenizer``'s special tokens."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.eos_token_id
    return model
