"""Tiny models and prompts shared by the sampling tests."""

from __future__ import annotations

import torch

from engine.models.tiny import build_tiny_model

PROMPTS = ["Two agents work together", "def add(a, b):", "Hi"]


def eos_prone(arch: str, eos_bias: float = 3.0):
    """A tiny model whose output layer adds ``eos_bias`` to the EOS logit, so samples stop early.

    With a bias of 3 about one sample in two ends within 16 tokens; with 6 nearly all do.
    """
    model, tokenizer = build_tiny_model(arch, "xs", seed=0)
    head = model.lm_head
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[tokenizer.eos_token_id] = eos_bias
    model.lm_head = biased
    return model, tokenizer
