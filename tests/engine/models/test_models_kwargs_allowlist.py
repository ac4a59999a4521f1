"""An agent's ``model_kwargs`` reach ``from_pretrained`` only through an allowlist
(:mod:`engine.permissions.model_kwargs`): attention implementations that could fetch a hub kernel (a mapping,
``flash_attention_2``, ``org/kernel``) count as code that comes with a model, and keys such as
``offload_folder``, ``device_map`` or ``cache_dir`` are refused in pre-flight and again at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.permissions.model_kwargs import ModelKwargsRefused, check_model_kwargs, model_kwargs_problems
from engine.permissions.operator import OperatorPermissions
from engine.permissions.remote_code import asked_for
from engine.schema.preflight import preflight_problems
from engine.schema.run_config import parse_run_config


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from engine.models import build_tiny_model

    path = tmp_path_factory.mktemp("model") / "tiny"
    model, tokenizer = build_tiny_model("llama", "xs")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def problems_of(folder: Path, allowed: bool = False, **kwargs: object) -> dict[str, str]:
    config = parse_run_config({"agents": [{"name": "a", "model": str(folder), "model_kwargs": kwargs},
                                          {"name": "b"}],
                               "task": {"name": "quickstart"}, "trainer": {"max_steps": 1, "max_new_tokens": 4}})
    return {p.field: p.message for p in preflight_problems(config, hub_cache_dirs=[],
                                                           permissions=OperatorPermissions(allow_remote_code=allowed))}


HUB_ATTENTION = [{"": "kernels-community/flash-attn2"}, {"text_config": "sdpa"}, "flash_attention_2",
                 "flash_attention_3", "flash_attention_4", "kernels-community/flash-attn2",
                 "org/kernel@v1:fn", "paged|flash_attention_2", ["sdpa"]]


@pytest.mark.parametrize("value", HUB_ATTENTION)
def test_attention_that_can_fetch_a_hub_kernel_counts_as_remote_code(value):
    assert asked_for({"attn_implementation": value}) == ["attn_implementation"]


@pytest.mark.parametrize("value", ["eager", "sdpa", "flex_attention"])
def test_attention_built_into_transformers_does_not(value):
    assert asked_for({"attn_implementation": value}) == []
    assert model_kwargs_problems({"attn_implementation": value}, False) == []


@pytest.mark.parametrize("value", [{"": "kernels-community/flash-attn2"}, "flash_attention_2"])
def test_preflight_refuses_hub_attention_unless_allowed(folder, value):
    problems = problems_of(folder, attn_implementation=value)
    message = problems["agents.0.model_kwargs"]
    assert "attn_implementation" in message and "COOPLAB_ALLOW_REMOTE_CODE=true" in message
    assert problems_of(folder, allowed=True, attn_implementation=value) == {}


@pytest.mark.parametrize("kwargs", [
    {"offload_folder": "/tmp/cooplab-offload"}, {"device_map": "auto"}, {"device_map": {"": "cpu"}},
    {"cache_dir": "/root/.cache/elsewhere"}, {"local_files_only": False}, {"subfolder": "../../etc"},
    {"gguf_file": "/etc/passwd"}, {"token": "hf_x"}, {"quantization_config": {"quant_method": "mxfp4"}},
    {"use_safetensors": False}, {"max_memory": {"cpu": "1GB"}}, {"kernel_config": {}},
    {"dtype": "load"}, {"torch_dtype": "float64"}, {"revision": "../../x"}, {"low_cpu_mem_usage": "yes"},
    {"max_position_embeddings": -1}, {"max_position_embeddings": True},
])
def test_preflight_refuses_arguments_off_the_allowlist(folder, kwargs):
    name = next(iter(kwargs))
    for allowed in (False, True):  # the remote-code permission does not widen what a config may pass
        message = problems_of(folder, allowed, **kwargs).get("agents.0.model_kwargs", "")
        assert name in message and "allowed" in message, (allowed, message)


def test_the_allowed_arguments_pass(folder):
    assert problems_of(folder, dtype="bfloat16", torch_dtype="float32", attn_implementation="sdpa",
                       low_cpu_mem_usage=True, revision="main", max_position_embeddings=256,
                       trust_remote_code=False, use_kernels=False) == {}
    assert problems_of(folder, revision="0123456789abcdef0123456789abcdef01234567") == {}


def test_builtins_keep_their_own_arguments():
    config = parse_run_config({"agents": [{"name": "a", "model": "builtin:tiny-llama",
                                           "model_kwargs": {"size": "s", "seed": 3}}, {"name": "b"}],
                               "task": {"name": "quickstart"}, "trainer": {"max_steps": 1, "max_new_tokens": 4}})
    assert preflight_problems(config, hub_cache_dirs=[], permissions=OperatorPermissions(allow_remote_code=False)) == []


def test_loading_refuses_them_and_creates_nothing(folder, tmp_path):
    from engine.models import ModelLoadError, load_agent

    offload = tmp_path / "offload"
    with pytest.raises(ModelLoadError, match="offload_folder"):
        load_agent(str(folder), model_kwargs={"offload_folder": str(offload), "device_map": "auto"},
                   allow_remote_code=False)
    assert not offload.exists()
    with pytest.raises(ModelLoadError, match="attn_implementation"):
        load_agent(str(folder), model_kwargs={"attn_implementation": {"": "kernels-community/flash-attn2"}},
                   allow_remote_code=False)
    model, _ = load_agent(str(folder), model_kwargs={"attn_implementation": "eager"}, allow_remote_code=False)
    assert model.config._attn_implementation == "eager"


def test_library_use_passes_its_own_arguments(folder, tmp_path):
    """A script using the engine as a library (no operator settings applied) keeps its own choices."""
    assert model_kwargs_problems({"device_map": "cpu", "cache_dir": str(tmp_path)}, None) == []
    check_model_kwargs({"device_map": "cpu"}, None)
    with pytest.raises(ModelKwargsRefused):
        check_model_kwargs({"device_map": "cpu"}, False)
