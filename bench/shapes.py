"""Real model shapes built from a config with random weights: nothing is downloaded.

The GPU check (``scripts/gpu_check.sh``, :mod:`cooplab.gpu_check`) and the GPU benchmark of record
(``scripts/gpu_bench.sh``, :mod:`bench.gpu`) build their models here. Each shape is a Qwen2 config:
Qwen2.5-0.5B (hidden 896, 24 layers, 14 attention / 2 KV heads, MLP 4864: 494 M parameters),
Qwen2.5-1.5B (1536, 28, 12 / 2, 8960: 1,544 M) and Qwen2.5-3B (2048, 36, 16 / 2, 11008: 3,086 M), each
with the vocabulary of 151,936 tokens and tied embeddings; ``tiny`` is the CPU suite's stand-in.
Importing this module imports nothing heavy.
"""

from __future__ import annotations

from typing import Any

_QWEN = dict(vocab_size=151_936, rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
_QWEN_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, max_position_embeddings=32_768, **_QWEN)
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2-0.5b": _QWEN_05B,  # the GPU check's name for it (Qwen2-0.5B has Qwen2.5-0.5B's shape)
    "qwen2.5-0.5b": _QWEN_05B,
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, max_position_embeddings=131_072, **_QWEN),
    "qwen2.5-3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
                       num_key_value_heads=2, max_position_embeddings=32_768, **_QWEN),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=1024, max_position_embeddings=2048, tie_word_embeddings=True),
}


def build_model(shape: str, device: str, dtype: Any, seed: int = 0, tokenizer: Any = None) -> tuple[Any, Any]:
    """A random Qwen2 of ``shape`` built from a config directly on ``device``, and its tokenizer
    (default: the tiny models' in-process tokenizer). The config's and the generation config's eos,
    bos and pad ids are the tokenizer's."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    if shape not in SHAPES:
        raise ValueError(f"unknown model shape {shape!r}: expected one of {sorted(SHAPES)}")
    if tokenizer is None:
        from engine.models.tiny import build_tiny_tokenizer

        tokenizer = build_tiny_tokenizer()
    ids = {"eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id}
    config = Qwen2Config(**SHAPES[shape], **ids)
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config.update(**ids)
    return model.eval(), tokenizer
