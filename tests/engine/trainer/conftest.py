"""Fixtures for trainer tests: a tiny heterogeneous team built from configs (offline, real models)."""

from __future__ import annotations

import pytest

from engine.models.tiny import build_tiny_model


@pytest.fixture
def team():
    """A tiny Llama and a tiny Qwen2 with their own tokenizers."""
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    return [m1, m2], [t1, t2]
