"""``cooplab train``: a real run from a YAML file into an output folder, and config errors (exit 2)."""

from __future__ import annotations

import json

import typer
import yaml
from typer.testing import CliRunner

from cooplab.cmd_train import EXIT_CONFIG_ERROR, register


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command("noop")
    def noop() -> None:  # a second command keeps typer in multi-command mode, as in the real CLI
        """Nothing."""

    return app


CONFIG = {
    "name": "cli-run",
    "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-qwen2"}],
    "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 1}},
    "trainer": {"max_steps": 5, "num_generations": 2, "max_new_tokens": 4, "rollout_buffer_size": 1,
                "eval_interval": 0, "checkpoint_interval": 1},
}


def test_train_command_writes_metrics_transcripts_and_checkpoints(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(_app(), ["train", str(path), "--output", str(out), "--max-steps", "2"])
    assert result.exit_code == 0, result.output
    assert "completed: step 2" in result.output
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("train/reward_mean" in json.dumps(m) for m in metrics)
    assert (out / "transcripts.jsonl").read_text().strip()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-1", "checkpoint-2"]
    assert (out / "model" / "agent_0").is_dir()


def test_config_errors_name_the_fields_and_exit_2(tmp_path) -> None:
    bad = json.loads(json.dumps(CONFIG))
    bad["trainer"]["num_generations"] = 1
    bad["agents"][1]["top_p"] = 3
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    result = CliRunner().invoke(_app(), ["train", str(path), "--output", str(tmp_path / "o")])
    assert result.exit_code == EXIT_CONFIG_ERROR
    assert "trainer.num_generations" in result.output and "agents.1.top_p" in result.output


def test_unknown_task_parameter_is_a_config_error(tmp_path) -> None:
    bad = json.loads(json.dumps(CONFIG))
    bad["task"]["params"] = {"no_such_param": 1}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    result = CliRunner().invoke(_app(), ["train", str(path), "--output", str(tmp_path / "o")])
    assert result.exit_code == EXIT_CONFIG_ERROR
    assert "no_such_param" in result.output


def test_missing_file_is_a_config_error(tmp_path) -> None:
    result = CliRunner().invoke(_app(), ["train", str(tmp_path / "nope.yaml")])
    assert result.exit_code == EXIT_CONFIG_ERROR and "not found" in result.output
