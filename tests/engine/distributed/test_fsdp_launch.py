"""``cooplab train`` of a ``parallel_training: fsdp`` run: torchrun starts two gloo ranks on this machine
(:mod:`cooplab.fsdp_launch`), two heterogeneous tiny agents train two steps, and the final weights and
metrics equal the same run in one process (:class:`engine.distributed.trainer.FSDPMAGRPOTrainer` without
a process group); a rank killed mid-run ends the launch with a failure naming the rank."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from typer.testing import CliRunner

from tests.engine.test_engine_cmd_train import _app

CONFIG = {
    "name": "fsdp-run",
    "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-qwen2"}],
    "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 1}},
    "trainer": {"max_steps": 2, "num_generations": 2, "max_new_tokens": 4, "rollout_buffer_size": 4,
                "train_batch_size": 4, "num_turns": 1, "eval_interval": 0, "logging_steps": 1, "seed": 3,
                "agent_learning_rate": 1e-2, "checkpoint_interval": 1,
                "parallel_training": "fsdp", "fsdp_ranks": 2},
}


@pytest.fixture
def run_yaml(tmp_path, monkeypatch):
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COOPLAB_COLLECTIVE_TIMEOUT_S", "60")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    return path


def _metrics(folder) -> list[dict]:
    return [json.loads(line)["metrics"] for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_two_ranks_under_torchrun_equal_the_single_process_run(run_yaml, tmp_path):
    from engine.build.run import run_training
    from engine.distributed.trainer import final_weights
    from engine.schema.run_config import load_run_config
    from engine.sinks import JsonlSink

    one = tmp_path / "one"
    single = run_training(load_run_config(run_yaml), output_dir=one, sink=JsonlSink(one))  # no process group
    assert (single.status, single.step) == ("completed", 2)

    two = tmp_path / "two"
    result = CliRunner().invoke(_app(), ["train", str(run_yaml), "--output", str(two)])
    assert result.exit_code == 0, result.output
    assert "torchrun --standalone --nproc_per_node=2" in result.output
    assert "[rank 1] " in result.output and "[rank 0] completed: step 2" in result.output

    before = final_weights(one / "checkpoints" / "checkpoint-1")
    for a, (got, want) in enumerate(zip(final_weights(two / "checkpoints" / "checkpoint-2"),
                                         final_weights(one / "checkpoints" / "checkpoint-2"), strict=True)):
        moved = max(float((want[n] - before[a][n]).abs().max()) for n in want)  # by the second step
        delta = max(float((got[n] - want[n]).abs().max()) for n in want)
        print(f"agent {a}: max |delta| {delta:.2g} after the second step moved it by {moved:.2g}")
        assert moved > 1e-3 and delta < 1e-5, (a, moved, delta)
    # rank 0 reported the whole step (both ranks' joint actions), once; the other rank wrote no reports
    got, want = _metrics(two), _metrics(one)
    assert [m["perf/ranks"] for m in got] == [2.0, 2.0]
    for g, w in zip(got, want, strict=True):
        assert g["train/reward_mean"] == w["train/reward_mean"]
        assert abs(g["agent/first/loss"] - w["agent/first/loss"]) < 1e-5
    assert (two / "transcripts.jsonl").read_text().strip()
    assert not (two / ".ranks" / "rank1" / "metrics.jsonl").exists()
    assert (two / "model" / "agent_1" / "model.safetensors").is_file()


def test_a_killed_rank_fails_the_launch_naming_it(run_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("COOPLAB_FSDP_FAULT", "1:1:kill")  # rank 1 kills itself before its second step
    started = time.monotonic()
    result = CliRunner().invoke(_app(), ["train", str(run_yaml), "--output", str(tmp_path / "out")])
    elapsed = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert "failed: rank 1 failed: exit code -9" in result.output, result.output[-3000:]
    assert elapsed < 240
    print(f"killed rank: the launch failed after {elapsed:.1f} s")
