"""The lean decoder gives exactly what Hugging Face ``generate`` gives, token for token."""

from __future__ import annotations

import pytest
import torch

from engine.models.tiny import build_tiny_model
from engine.sampling.sampler import generate_completions
from tests.engine.sampling.sampling_fixtures import PROMPTS, eos_prone

SETTINGS = {
    "greedy": {"do_sample": False, "temperature": 1.0, "top_p": 1.0, "top_k": None},
    "comlrl_defaults": {"do_sample": True, "temperature": 0.6, "top_p": 0.6, "top_k": 50},
    "full_vocabulary": {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": None},
    "nucleus": {"do_sample": True, "temperature": 0.8, "top_p": 0.9, "top_k": None},
    "top_k_only": {"do_sample": True, "temperature": 1.3, "top_p": 1.0, "top_k": 5},
}


def _both(model, tokenizer, settings: dict, prompts=PROMPTS, k: int = 4, n: int = 16):
    results = []
    for decoder in ("generate", "lean"):
        generator = torch.Generator().manual_seed(1234)
        results.append(
            generate_completions(
                model,
                tokenizer,
                prompts,
                num_generations=k,
                max_new_tokens=n,
                generator=generator,
                decoder=decoder,
                **settings,
            )
        )
    return results


@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_lean_matches_generate(arch: str, setting: str) -> None:
    model, tokenizer = build_tiny_model(arch, "xs", seed=2)
    reference, lean = _both(model, tokenizer, SETTINGS[setting])
    assert torch.equal(reference.completion_ids, lean.completion_ids)
    assert torch.equal(reference.completion_mask, lean.completion_mask)
    assert reference.texts == lean.texts


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_lean_matches_generate_when_samples_stop_early(arch: str) -> None:
    model, tokenizer = eos_prone(arch)
    reference, lean = _both(model, tokenizer, SETTINGS["full_vocabulary"])
    lengths = reference.completion_lengths.tolist()
    assert min(lengths) < 16  # the comparison covers rows that ended at EOS
    assert torch.equal(reference.completion_ids, lean.completion_ids)


def test_lean_matches_generate_when_every_sample_stops_early() -> None:
    model, tokenizer = eos_prone("llama", eos_bias=6.0)
    reference, lean = _both(model, tokenizer, SETTINGS["full_vocabulary"], n=24)
    assert reference.completion_ids.shape[1] < 24  # decoding ended before the token limit
    assert torch.equal(reference.completion_ids, lean.completion_ids)


def test_lean_matches_generate_without_padding() -> None:
    model, tokenizer = build_tiny_model("qwen2", "xs", seed=3)
    same_length = [[5, 6, 7, 8], [9, 10, 11, 12]]
    reference, lean = _both(model, tokenizer, SETTINGS["nucleus"], prompts=same_length)
    assert bool(reference.prompt_mask.all())
    assert torch.equal(reference.completion_ids, lean.completion_ids)
