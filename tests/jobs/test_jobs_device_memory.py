"""``COOPLAB_DEVICE_MEMORY_GIB``: pre-flight of a run on a GPU queue refuses agents whose full fine-tuning
cannot fit one GPU (engine.schema.memory), naming the agent, the bytes and the options; unset, or on the
CPU queue, nothing is checked."""

from __future__ import annotations

from engine.schema.run_config import parse_run_config
from jobs.preflight import run_config_problems, run_limits
from jobs.settings import Settings
from tests.jobs.helpers import qwen2_1_5b_folder


def _config(tmp_path):
    folder = qwen2_1_5b_folder(tmp_path)  # Qwen2.5-1.5B's shape: 1,543,714,304 parameters
    return parse_run_config({"agents": [{"name": "writer", "model": str(folder)}, {"name": "small"}],
                             "task": {"name": "quickstart"}, "trainer": {"num_generations": 2}})


def _memory(problems) -> list[str]:
    """The memory refusals among pre-flight's problems (the model folder is also outside the read roots)."""
    return [p.message for p in problems if p.field == "agents.0.model" and "full fine-tuning" in p.message]


def test_a_gpu_queue_refuses_an_agent_that_cannot_fit_its_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv("COOPLAB_DEVICE_MEMORY_GIB", raising=False)
    config = _config(tmp_path)
    need = 16 * 1_543_714_304  # float32 parameters, gradients and AdamW's two moments: 24.7 GB
    small = Settings(home=tmp_path / "home", device_memory_gib=16, require_cached_models=False)
    [refusal] = _memory(run_config_problems(config, settings=small, device="cuda:0"))
    assert f"{need:,} bytes" in refusal and "agent writer" in refusal and "lora_rank" in refusal
    assert run_limits(small, "cuda:1").device_memory_bytes == 16 * 1024**3
    assert _memory(run_config_problems(config, settings=small, device="cpu")) == []
    large = Settings(home=tmp_path / "home", device_memory_gib=80, require_cached_models=False)
    assert _memory(run_config_problems(config, settings=large, device="cuda:0")) == []
    unset = Settings(home=tmp_path / "home", require_cached_models=False)
    assert run_limits(unset, "cuda:0").device_memory_bytes is None
