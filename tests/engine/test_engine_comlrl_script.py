"""A CoMLRL-style script runs unchanged except for its imports, on tiny models saved to folders
(so the agents load through the real ``from_pretrained`` path, as CoMLRL loads model ids)."""

from __future__ import annotations

import math
import runpy
import sys
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM

from engine.models.tiny import build_tiny_model
from engine.sinks import MemorySink

SCRIPT = Path(__file__).with_name("comlrl_style_script.py")


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    dirs = []
    for arch, seed in (("llama", 0), ("qwen2", 1)):
        model, tok = build_tiny_model(arch, "xs", seed=seed)
        model.save_pretrained(root / arch)
        tok.save_pretrained(root / arch)
        dirs.append(str(root / arch))
    return dirs


def _run(model_dirs, out: Path, num_turns: int, joint_mode: str, monkeypatch) -> dict:
    sink = MemorySink()
    from engine.trainer import magrpo as trainer_module

    # observe the run: give every trainer the script creates a memory sink (the script itself is unchanged)
    original = trainer_module.MAGRPOTrainer.__init__

    def with_sink(self, *args, **kwargs):
        kwargs.setdefault("sink", sink)
        original(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module.MAGRPOTrainer, "__init__", with_sink)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *model_dirs, str(out), str(num_turns), joint_mode])
    namespace = runpy.run_path(str(SCRIPT), run_name="__main__")
    return {"trainer": namespace["trainer"], "sink": sink}


@pytest.mark.parametrize(("num_turns", "joint_mode", "env_per_item"), [(1, "aligned", 2), (2, "aligned", 6),
                                                                         (2, "cross", 20)])
def test_comlrl_script_runs_with_engine_imports(model_dirs, tmp_path, monkeypatch, num_turns, joint_mode,
                                                env_per_item) -> None:
    run = _run(model_dirs, tmp_path, num_turns, joint_mode, monkeypatch)
    trainer, sink = run["trainer"], run["sink"]
    assert trainer.env_step == 4 * env_per_item  # every item of the one epoch was rolled out
    assert sink.finished == ["completed"]
    for step in sink.steps:
        assert all(math.isfinite(step.metrics[f"agent/agent_{i}/loss"]) for i in range(2))
        assert step.episodes and len(step.episodes[0].turns) == 2 * num_turns
    assert any("eval/turn_1/avg_len_ratio" in m for _, _, m in sink.metrics)
    for i in range(2):
        saved = AutoModelForCausalLM.from_pretrained(tmp_path / f"agent_{i}")
        original = AutoModelForCausalLM.from_pretrained(model_dirs[i])
        assert any(not (a == b).all() for a, b in zip(saved.parameters(), original.parameters(), strict=True))
