"""LoRA tests need peft (the ``lora`` extra); without it they are skipped, naming the missing package."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("peft") is None:
    pytest.skip("peft is not installed (pip install 'cooplab[lora]')", allow_module_level=True)
