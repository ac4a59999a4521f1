"""A CoMLRL-style MADPO script runs unchanged except for its imports, on tiny models saved to folders
(so the agents load through the real ``from_pretrained`` path, as CoMLRL loads model ids)."""

from __future__ import annotations

import math
import runpy
import sys
from pathlib import Path

from transformers import AutoModelForCausalLM

from engine.models.tiny import build_tiny_model
from engine.preference import madpo
from engine.sinks import MemorySink

SCRIPT = Path(__file__).with_name("comlrl_madpo_script.py")


def test_comlrl_madpo_script_runs_with_engine_imports(tmp_path, monkeypatch) -> None:
    dirs = []
    for arch, seed in (("llama", 0), ("qwen2", 1)):
        model, tok = build_tiny_model(arch, "xs", seed=seed)
        model.save_pretrained(tmp_path / arch)
        tok.save_pretrained(tmp_path / arch)
        dirs.append(str(tmp_path / arch))
    sink = MemorySink()
    original = madpo.MADPOTrainer.__init__

    def with_sink(self, *args, **kwargs):  # observe the run; the script itself is unchanged
        kwargs.setdefault("sink", sink)
        original(self, *args, **kwargs)

    monkeypatch.setattr(madpo.MADPOTrainer, "__init__", with_sink)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *dirs, str(tmp_path / "out")])
    trainer = runpy.run_path(str(SCRIPT), run_name="__main__")["trainer"]
    assert sink.finished == ["completed"] and trainer.collected_items == 3
    assert len(sink.steps) == trainer.total_steps > 0
    assert all(math.isfinite(s.metrics[f"agent/agent_{i}/loss"]) for s in sink.steps for i in range(2))
    assert [step for step, _, m in sink.metrics if "eval/reward_mean" in m][0] == 0  # CoMLRL's eval schedule
    for i, source in enumerate(dirs):
        saved = AutoModelForCausalLM.from_pretrained(tmp_path / "out" / f"agent_{i}")
        start = AutoModelForCausalLM.from_pretrained(source)
        assert any(not (a == b).all() for a, b in zip(saved.parameters(), start.parameters(), strict=True))
