"""JsonlSink files, ConsoleSink output and the optional WandbSink."""

from __future__ import annotations

import importlib.util
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from engine.sinks import (
    ConsoleSink,
    Episode,
    JsonlSink,
    TurnRecord,
    WandbSink,
    episode_from_dict,
    episode_to_dict,
    read_jsonl,
)

ROOT = Path(__file__).resolve().parents[3]


def _episode(sample: int) -> Episode:
    turns = (
        TurnRecord(1, 0, "aux", "Write aux", "def aux(): ...", 0.5, 1.5, -0.25),
        TurnRecord(1, 1, "main", "Write main", "def main(): ☃", 0.5, 1.5, 0.75),
    )
    return Episode(sample_index=sample, split="train", item_index=7, turns=turns)


def test_jsonl_sink_writes_metrics_transcripts_and_events(tmp_path) -> None:
    sink = JsonlSink(tmp_path / "run")
    sink.start(2, {"trainer": {"lr": 0.001}})
    sink.log_step(
        1, 4, {"train/reward_mean": 0.5, "agent/aux/loss": float("nan")}, [_episode(0), _episode(1)]
    )
    # flushed every step: readable before the run ends
    metrics = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert metrics[0]["step"] == 1 and metrics[0]["env_step"] == 4
    assert metrics[0]["metrics"] == {"train/reward_mean": 0.5, "agent/aux/loss": None}
    sink.log_step(2, 8, {"train/reward_mean": 0.75}, [])
    sink.log_metrics(2, 8, {"eval/turn_1/reward_mean": 1.0})
    sink.log_checkpoint(2, str(tmp_path / "ckpt"))
    sink.log_checkpoint_pruned(1, str(tmp_path / "ckpt-1"))
    sink.finish("completed")

    metrics = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 2]
    assert metrics[2]["metrics"] == {"eval/turn_1/reward_mean": 1.0}
    transcripts = read_jsonl(tmp_path / "run" / "transcripts.jsonl")
    assert len(transcripts) == 2
    step, episode = episode_from_dict(transcripts[1])
    assert step == 1 and episode == _episode(1)
    events = read_jsonl(tmp_path / "run" / "events.jsonl")
    assert [e["event"] for e in events] == ["start", "checkpoint", "checkpoint_pruned", "finish"]
    assert events[0]["config"] == {"trainer": {"lr": 0.001}} and events[0]["total_steps"] == 2
    assert (events[2]["step"], events[2]["path"]) == (1, str(tmp_path / "ckpt-1"))
    assert events[3]["status"] == "completed"


def test_jsonl_sink_appends_across_sinks(tmp_path) -> None:
    first = JsonlSink(tmp_path)
    first.log_step(1, 1, {"train/reward_mean": 1.0}, [])
    first.finish("stopped")
    second = JsonlSink(tmp_path)  # a resumed run keeps writing into the same folder
    second.log_step(2, 2, {"train/reward_mean": 2.0}, [])
    second.finish("completed")
    assert [m["metrics"]["train/reward_mean"] for m in read_jsonl(tmp_path / "metrics.jsonl")] == [1.0, 2.0]
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines)


def test_jsonl_stop_file_asks_to_stop(tmp_path) -> None:
    sink = JsonlSink(tmp_path)
    assert not sink.should_stop()
    (tmp_path / "STOP").touch()
    assert sink.should_stop()


def test_read_jsonl_skips_a_torn_last_line(tmp_path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


def test_episode_round_trip_keeps_nan_as_nan() -> None:
    episode = Episode(0, "eval", None, (TurnRecord(1, 0, "a", "p", "c", math.nan, 0.0, 0.0),))
    data = json.loads(json.dumps(episode_to_dict(3, episode)))
    assert data["turns"][0]["reward"] is None
    step, back = episode_from_dict(data)
    assert step == 3 and math.isnan(back.turns[0].reward)


def test_console_sink_shows_progress_reward_and_step_time() -> None:
    out = io.StringIO()
    sink = ConsoleSink(out)
    sink.start(2, {})
    sink.log_step(1, 4, {"train/reward_mean": 0.123456, "perf/step_time_s": 0.5}, [])
    sink.log_metrics(1, 4, {"eval/turn_1/reward_mean": 0.75})
    sink.log_checkpoint(1, "/tmp/ck")
    sink.log_step(2, 8, {"train/reward_mean": 0.5, "perf/step_time_s": 0.25}, [])
    sink.finish("completed")
    text = out.getvalue()
    assert "2/2" in text
    assert "reward=0.5" in text and "step_s=0.25" in text
    assert "eval/turn_1/reward_mean=0.75" in text
    assert "checkpoint saved to /tmp/ck" in text
    assert text.rstrip().endswith("run completed")


def test_wandb_sink_explains_how_to_install_wandb(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` fail as if it were missing
    with pytest.raises(ImportError, match="pip install wandb"):
        WandbSink(project="x")


def test_importing_the_sinks_does_not_import_wandb() -> None:
    code = "import sys, engine.sinks; print('wandb' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb is an optional extra")
def test_wandb_sink_logs_to_an_offline_run(tmp_path) -> None:
    sink = WandbSink(project="cooplab-test", mode="offline", dir=str(tmp_path))
    sink.start(1, {"lr": 0.1})
    sink.log_step(1, 4, {"train/reward_mean": 0.5}, [_episode(0)])
    assert sink.run is not None
    sink.finish("completed")
    assert sink.run is None
    assert any(tmp_path.rglob("*.wandb"))
