"""Code that comes with a model runs only when the operator allows it (:mod:`engine.permissions.remote_code`): a
real local model folder whose ``config.json`` has an ``auto_map`` pointing at a Python file that writes
a marker file when imported, loaded through the real loading path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.permissions.operator import OperatorPermissions
from engine.permissions.remote_code import (
    RemoteCodeRefused,
    asked_for,
    remote_code_problem,
    trust_remote_code,
)
from engine.schema.preflight import preflight_problems
from engine.schema.run_config import ConfigError, parse_run_config

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def code_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny Llama folder whose config.json maps AutoConfig and AutoModelForCausalLM to ``custom_code.py``,
    which writes ``marker`` when imported. Returns (folder, marker)."""
    from engine.models import build_tiny_model

    folder, marker = tmp_path / "custom-model", tmp_path / "marker.txt"
    model, tokenizer = build_tiny_model("llama", "xs")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "custom_code.py").write_text(textwrap.dedent(f"""
        from pathlib import Path

        Path({str(marker)!r}).write_text("the model's own code ran")

        from transformers import LlamaConfig, LlamaForCausalLM


        class CustomConfig(LlamaConfig):
            pass


        class CustomModel(LlamaForCausalLM):
            config_class = CustomConfig
        """))
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "custom_code.CustomConfig",
                          "AutoModelForCausalLM": "custom_code.CustomModel"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder, marker


def run_config(folder: Path, **model_kwargs: object) -> dict:
    return {"agents": [{"name": "a", "model": str(folder), "model_kwargs": model_kwargs}, {"name": "b"}],
            "task": {"name": "quickstart"}, "trainer": {"max_steps": 1, "max_new_tokens": 4}}


def test_what_counts_as_asking_for_remote_code() -> None:
    assert asked_for({"trust_remote_code": True, "dtype": "float32"}) == ["trust_remote_code"]
    assert asked_for({"trust_remote_code": "yes"}) == ["trust_remote_code"]
    assert asked_for({"trust_remote_code": False, "attn_implementation": "sdpa"}) == []
    assert asked_for({"attn_implementation": "kernels-community/flash-attn"}) == ["attn_implementation"]
    assert asked_for({"use_kernels": True}) == ["use_kernels"]
    assert remote_code_problem({"trust_remote_code": True}, True) is None
    assert trust_remote_code({"trust_remote_code": True}, None) is True  # library use: as the caller asks
    assert trust_remote_code({}, False) is False
    with pytest.raises(RemoteCodeRefused, match="COOPLAB_ALLOW_REMOTE_CODE=true"):
        trust_remote_code({"trust_remote_code": True}, False)


def test_preflight_refuses_trust_remote_code_and_runs_nothing(code_folder: tuple[Path, Path]) -> None:
    folder, marker = code_folder
    problems = {p.field: p.message for p in preflight_problems(parse_run_config(run_config(folder,
                                                                                trust_remote_code=True)),
                                                               hub_cache_dirs=[],
                                                               permissions=OperatorPermissions(allow_remote_code=False))}
    assert problems["agents.0.model_kwargs"].startswith("trust_remote_code=True would run Python that comes with "
                                                        "the model")
    assert "COOPLAB_ALLOW_REMOTE_CODE=true" in problems["agents.0.model_kwargs"]
    assert not marker.exists()
    allowed = preflight_problems(parse_run_config(run_config(folder, trust_remote_code=True)), hub_cache_dirs=[],
                                 permissions=OperatorPermissions(allow_remote_code=True))
    assert allowed == [] and not marker.exists()  # pre-flight reads config.json as JSON only


def test_loading_refuses_trust_remote_code_unless_allowed(code_folder: tuple[Path, Path]) -> None:
    from engine.models import ModelLoadError, load_agent

    folder, marker = code_folder
    with pytest.raises(ModelLoadError, match="trust_remote_code=True would run Python that comes with the model"):
        load_agent(str(folder), model_kwargs={"trust_remote_code": True}, allow_remote_code=False)
    assert not marker.exists()


def test_an_auto_map_alone_never_runs(code_folder: tuple[Path, Path]) -> None:
    """Without the argument the folder loads with transformers' own Llama classes, even when allowed."""
    from engine.models import load_agent

    folder, marker = code_folder
    for allowed in (False, True, None):
        model, _tokenizer = load_agent(str(folder), allow_remote_code=allowed)
        assert type(model).__name__ == "LlamaForCausalLM"
    assert not marker.exists()


def test_run_training_refuses_it_before_loading_anything(code_folder: tuple[Path, Path], tmp_path: Path) -> None:
    """A worker runs what is stored: the engine checks again, whatever pre-flight said."""
    from engine.build.run import run_training
    from engine.sinks import MemorySink

    folder, marker = code_folder
    config = parse_run_config(run_config(folder, trust_remote_code=True))
    with pytest.raises(ConfigError, match="agents.0.model_kwargs: trust_remote_code=True would run Python"):
        run_training(config, output_dir=tmp_path / "out", sink=MemorySink())  # library default: not allowed
    operator = OperatorPermissions(allow_remote_code=False, api_hosts="")
    with pytest.raises(ConfigError, match="agents.0.model_kwargs: trust_remote_code=True would run Python"):
        run_training(config, output_dir=tmp_path / "out2", sink=MemorySink(), permissions=operator)
    assert not marker.exists()


def test_with_the_operators_permission_the_models_code_loads(code_folder: tuple[Path, Path], tmp_path: Path) -> None:
    """The same folder with the permission: its code runs (so the refusals above are real). In a child
    process, so transformers copies the module into a module cache under tmp_path."""
    folder, marker = code_folder
    script = textwrap.dedent(f"""
        from engine.models import load_agent

        model, _ = load_agent({str(folder)!r}, model_kwargs={{"trust_remote_code": True}}, allow_remote_code=True)
        print(type(model).__name__)
        """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_MODULES_CACHE": str(tmp_path / "modules"),
           "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "CustomModel"
    assert marker.read_text() == "the model's own code ran"
