"""Module-scoped tiny models for the sampling tests."""

from __future__ import annotations

import pytest

from engine.models.tiny import build_tiny_model
from tests.engine.sampling.sampling_fixtures import eos_prone


@pytest.fixture(scope="module")
def llama():
    return build_tiny_model("llama", "xs", seed=1)


@pytest.fixture(scope="module")
def eos_llama():
    return eos_prone("llama")
