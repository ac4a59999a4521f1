"""Tiny random causal LMs of the architectures beyond ``engine.models.tiny``'s (Mistral, Qwen3, Phi3,
Gemma, Olmo2), built from a config with the tiny tokenizer's vocabulary: nothing is downloaded."""

from __future__ import annotations

from typing import Any

from transformers import (
    GemmaConfig,
    MistralConfig,
    Olmo2Config,
    Phi3Config,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3Config,
)

from engine.models.tiny import build_tiny_tokenizer, seeded_model

CONFIGS = {"mistral": MistralConfig, "qwen3": Qwen3Config, "phi3": Phi3Config, "gemma": GemmaConfig,
           "olmo2": Olmo2Config}


def build_arch_model(arch: str, seed: int = 0, **overrides: Any) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A 2-layer model of ``arch`` (hidden 64, 4 query heads on 2 key/value heads of 16 dims) with
    random weights from ``seed`` (the global RNG is left alone); ``overrides`` go to the config."""
    tokenizer = build_tiny_tokenizer(1024)
    settings: dict[str, Any] = {
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 128, "max_position_embeddings": 512, "tie_word_embeddings": False,
        "vocab_size": len(tokenizer), "eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }  # fmt: skip
    settings.update(overrides)
    return seeded_model(CONFIGS[arch](**settings), tokenizer, seed), tokenizer
