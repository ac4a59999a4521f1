"""bench/training/same_training.py: the comparison of two trees' records says identical only when every
metric, turn and weight is, and names the first difference otherwise (no training here)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bench.training.same_training import _digest, _stable, compare


def _record(folder: Path, metrics: dict, weights: dict[str, torch.Tensor], completion: str = "ab") -> None:
    folder.mkdir(parents=True)
    torch.save(weights, folder / "weights.pt")
    record = {"metrics": [{"step": 0, "env_step": 4, "metrics": metrics}],
              "transcripts": [[0, [{"completion": completion}]]],
              "weights": {k: _digest(v) for k, v in sorted(weights.items())}}
    (folder / "record.json").write_text(json.dumps(record))


def test_identical_records_compare_equal_and_any_difference_is_named(tmp_path, capsys) -> None:
    w = {"model/agent_0/model.safetensors::w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    _record(tmp_path / "a" / "quickstart", {"loss": 0.5}, w)
    _record(tmp_path / "b" / "quickstart", {"loss": 0.5}, {k: v.clone() for k, v in w.items()})
    assert compare(tmp_path / "a", tmp_path / "b") == 0
    assert "| quickstart | yes | yes | yes (1 tensors) |" in capsys.readouterr().out

    nudged = {k: v + torch.tensor([[0.0, 0.0, 2.0**-20], [0.0, 0.0, 0.0]]) for k, v in w.items()}
    _record(tmp_path / "c" / "quickstart", {"loss": 0.5 + 2.0**-40}, nudged, completion="ac")
    assert compare(tmp_path / "a", tmp_path / "c") == 1
    row = capsys.readouterr().out.splitlines()[-1]
    assert "no: step 0: 1 keys differ, e.g. loss" in row
    assert "| no |" in row  # the transcripts
    assert "max |diff| 9.54e-07 (model/agent_0/model.safetensors::w)" in row

    renamed = {"critic/value_head.pt::w": w["model/agent_0/model.safetensors::w"].clone()}
    _record(tmp_path / "d" / "quickstart", {"loss": 0.5}, renamed)
    assert compare(tmp_path / "a", tmp_path / "d") == 0
    assert "same 1 tensors (dtype, shape, bytes) under other file or key names" in capsys.readouterr().out


def test_digest_sees_dtype_and_shape_and_wall_clock_keys_are_left_out() -> None:
    t = torch.zeros(4)
    assert _digest(t) != _digest(t.reshape(2, 2)) != _digest(t.double())
    dropped: set[str] = set()
    kept = _stable({"perf/step_time_s": 1.2, "perf/tokens_per_s": 9.0, "agent/a/loss": 0.1,
                    "perf/credit_reward_calls": 6}, dropped)
    assert kept == {"agent/a/loss": 0.1, "perf/credit_reward_calls": 6}
    assert dropped == {"perf/step_time_s", "perf/tokens_per_s"}
