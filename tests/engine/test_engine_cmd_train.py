"""``cooplab train``: a real run from a YAML file into an output folder, config and pre-flight errors
(exit 2, nothing run), and the task module allowlist setting."""

from __future__ import annotations

import json
import sys

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


def _write(tmp_path, config: dict):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_a_task_off_the_allowlist_is_refused_and_nothing_runs(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("COOPLAB_TASK_MODULES", raising=False)
    marker = tmp_path / "shell-ran"
    bad = json.loads(json.dumps(CONFIG))
    bad["task"] = {"name": "os:system", "params": {"command": f"touch {marker}"}}
    out = tmp_path / "o"
    result = CliRunner().invoke(_app(), ["train", str(_write(tmp_path, bad)), "--output", str(out)])
    assert result.exit_code == EXIT_CONFIG_ERROR, result.output
    assert "task.name: task 'os:system' is not allowed: module 'os' is not on the task module allowlist" in result.output
    assert "COOPLAB_TASK_MODULES" in result.output and "quickstart" in result.output
    assert not marker.exists() and not out.exists()


def test_preflight_problems_stop_the_command_before_anything_is_loaded(tmp_path) -> None:
    bad = json.loads(json.dumps(CONFIG))
    bad["agents"][0]["model"] = str(tmp_path / "x" / "y")
    bad["trainer"]["max_new_tokens"] = 4096
    out = tmp_path / "o"
    result = CliRunner().invoke(_app(), ["train", str(_write(tmp_path, bad)), "--output", str(out)])
    assert result.exit_code == EXIT_CONFIG_ERROR, result.output
    assert f"agents.0.model: folder {tmp_path / 'x' / 'y'} does not exist" in result.output
    assert "trainer.max_new_tokens: 4096 new tokens do not fit the context of agents.1.model" in result.output
    assert not out.exists()


PLUGIN = '''
from engine.tasks import build_task


def small_quickstart(num_agents: int = 2, items: int = 2):
    return build_task("quickstart", {"num_items": items, "eval_items": 0}, num_agents)
'''


def test_the_task_modules_setting_allows_a_plugin(tmp_path, monkeypatch) -> None:
    (tmp_path / "cli_allowed_tasks.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("COOPLAB_TASK_MODULES", "cli_allowed_tasks")
    config = json.loads(json.dumps(CONFIG))
    config["task"] = {"name": "cli_allowed_tasks:small_quickstart", "params": {"items": 3}}
    out = tmp_path / "o"
    try:
        result = CliRunner().invoke(_app(), ["train", str(_write(tmp_path, config)), "--output", str(out),
                                             "--max-steps", "1"])
    finally:
        sys.modules.pop("cli_allowed_tasks", None)
    assert result.exit_code == 0, result.output
    assert "completed: step 1" in result.output
