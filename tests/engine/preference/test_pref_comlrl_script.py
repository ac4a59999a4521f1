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
from tests.engine.preference.api_server import ApiServer

SCRIPT = Path(__file__).with_name("comlrl_madpo_script.py")
ITERATIVE = Path(__file__).with_name("comlrl_iterative_script.py")


def _model_folders(tmp_path) -> list[str]:
    """Two tiny models saved with ``save_pretrained`` (the scripts load them by folder, as CoMLRL loads ids)."""
    dirs = []
    for arch, seed in (("llama", 0), ("qwen2", 1)):
        model, tok = build_tiny_model(arch, "xs", seed=seed)
        model.save_pretrained(tmp_path / arch)
        tok.save_pretrained(tmp_path / arch)
        dirs.append(str(tmp_path / arch))
    return dirs


def test_comlrl_madpo_script_runs_with_engine_imports(tmp_path, monkeypatch) -> None:
    dirs = _model_folders(tmp_path)
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


def test_comlrl_iterative_scripts_run_with_engine_imports(tmp_path, monkeypatch) -> None:
    """MADPOIter against an OpenAI-format comparator (a real local HTTP server) with CoMLRL's file
    settings, then MARLHF with an IAC stage: every CoMLRL setting the script passes is read."""
    dirs = _model_folders(tmp_path)
    api = ApiServer(lambda body: {"choices": [{"message": {"content": "12 34"}}] * body["n"]})
    monkeypatch.setenv("COMPARATOR_TEST_KEY", "sk-script")
    out = tmp_path / "out"
    try:
        monkeypatch.setattr(sys, "argv", [str(ITERATIVE), *dirs, api.url, str(out)])
        scope = runpy.run_path(str(ITERATIVE), run_name="__main__")
    finally:
        api.close()
    iterative, rlhf = scope["iterative"], scope["rlhf"]
    assert iterative.iteration == 1 and iterative.total_pairs > 0
    ns = sorted(body["n"] for _, body in api.requests)  # the requests of a chunk run concurrently
    assert ns == sorted([2, 1] * (3 * 2 * 2))  # 3 answers in requests of 2 + 1, for 3 items x 2 agents x 2 iterations
    assert {headers["Authorization"] for headers, _ in api.requests} == {"Bearer sk-script"}
    assert sorted(p.name for p in (out / "replay").iterdir()) == ["iteration_001.jsonl", "iteration_002.jsonl"]
    assert sorted(p.name for p in (out / "policies").iterdir()) == ["iteration_001", "iteration_002"]
    assert (out / "madpo_iter" / "agent_0" / "config.json").is_file()
    assert type(rlhf).__name__ == "MARLHFIACTrainer" and rlhf.args.value_loss_coef == 0.5 and rlhf.critics
    assert (out / "marlhf" / "agent_1" / "config.json").is_file() and (out / "marlhf" / "critic_0.pt").is_file()
