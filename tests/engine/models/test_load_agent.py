"""load_agent: built-ins, model objects, dtype/device handling and the errors it gives."""

from __future__ import annotations

import pytest
import torch

from engine.models import ModelLoadError, builtin_sources, load_agent
from engine.models.tiny import build_tiny_model, build_tiny_tokenizer


@pytest.mark.parametrize(
    ("source", "model_type"), [("builtin:tiny-llama", "llama"), ("builtin:tiny-qwen2", "qwen2")]
)
def test_builtin_tiny_sources(source: str, model_type: str) -> None:
    model, tokenizer = load_agent(source)
    assert model.config.model_type == model_type
    assert tokenizer.pad_token is not None
    assert next(model.parameters()).device.type == "cpu"


def test_builtin_size_suffix_and_model_kwargs_pick_the_same_model() -> None:
    by_suffix, _ = load_agent("builtin:tiny-llama-s")
    by_kwargs, _ = load_agent("builtin:tiny-llama", model_kwargs={"size": "s", "seed": 0})
    xs, _ = load_agent("builtin:tiny-llama")
    assert by_suffix.config.hidden_size == by_kwargs.config.hidden_size > xs.config.hidden_size
    assert all(torch.equal(a, b) for a, b in zip(by_suffix.parameters(), by_kwargs.parameters(), strict=True))


def test_builtin_seed_changes_the_weights() -> None:
    a, _ = load_agent("builtin:tiny-qwen2", model_kwargs={"seed": 1})
    b, _ = load_agent("builtin:tiny-qwen2", model_kwargs={"seed": 2})
    assert not torch.equal(a.lm_head.weight, b.lm_head.weight)


def test_model_object_needs_its_tokenizer() -> None:
    model, tokenizer = build_tiny_model()
    with pytest.raises(ModelLoadError, match="needs its tokenizer"):
        load_agent(model)
    same, tok = load_agent(model, tokenizer=tokenizer)
    assert same is model
    assert tok is tokenizer


def test_pad_token_falls_back_to_eos() -> None:
    model, _ = build_tiny_model()
    tokenizer = build_tiny_tokenizer()
    tokenizer.pad_token = None
    tokenizer.padding_side = "right"
    _, tok = load_agent(model, tokenizer=tokenizer)
    assert tok.pad_token == tok.eos_token
    assert tok.padding_side == "left"


def test_dtype_by_name() -> None:
    model, _ = load_agent("builtin:tiny-llama", dtype="bfloat16")
    assert model.dtype == torch.bfloat16


def test_local_folder_with_dtype(tmp_path) -> None:
    model, tokenizer = build_tiny_model("qwen2")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded, _ = load_agent(str(tmp_path), dtype=torch.bfloat16)
    assert loaded.dtype == torch.bfloat16


def test_missing_folder_is_named(tmp_path) -> None:
    missing = str(tmp_path / "nowhere")
    with pytest.raises(ModelLoadError, match="does not exist") as info:
        load_agent(missing)
    assert missing in str(info.value)


def test_folder_without_config_is_named(tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="no config.json") as info:
        load_agent(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_folder_without_weights_names_the_source(tmp_path) -> None:
    model, _ = build_tiny_model()
    model.config.save_pretrained(tmp_path)  # a config but no weights and no tokenizer
    with pytest.raises(ModelLoadError, match="cannot load") as info:
        load_agent(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_unknown_builtin_lists_the_choices() -> None:
    with pytest.raises(ModelLoadError, match="unknown built-in") as info:
        load_agent("builtin:tiny-bert")
    assert "builtin:tiny-llama" in str(info.value)
    assert "builtin:smollm2-135m" in builtin_sources()


@pytest.mark.parametrize(
    ("source", "kwargs", "message"),
    [
        ("builtin:tiny-llama-huge", {}, "unknown tiny model size"),
        ("builtin:tiny-llama", {"layers": 3}, "unknown model_kwargs"),
        ("builtin:tiny-llama", {"dtype": "fp8"}, "unknown dtype"),
        ("", {}, "model source must be"),
        (42, {}, "model source must be"),
    ],
)
def test_bad_requests_are_explained(source, kwargs: dict, message: str) -> None:
    dtype = kwargs.pop("dtype", None)
    with pytest.raises(ModelLoadError, match=message):
        load_agent(source, dtype=dtype, model_kwargs=kwargs)


def test_a_module_that_cannot_generate_is_refused() -> None:
    with pytest.raises(ModelLoadError, match="cannot generate"):
        load_agent(torch.nn.Linear(2, 2), tokenizer=build_tiny_tokenizer())
