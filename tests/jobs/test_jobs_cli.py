"""The job commands of the ``cooplab`` CLI, run in-process against a real SQLite file and the
filesystem broker (no worker: queued runs are inspected and cancelled)."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from cooplab.cli import app
from db import states
from tests.jobs.helpers import tiny_config

runner = CliRunner()


def test_db_upgrade_creates_the_schema(jobs_env):
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "database up to date" in result.output
    assert (jobs_env.data_dir / "cooplab.db").exists()


def test_submit_runs_and_stop_from_the_command_line(jobs_env, store, tmp_path):
    config_path = tmp_path / "run.yaml"
    config_path.write_text(yaml.safe_dump(tiny_config(max_steps=7)))

    submitted = runner.invoke(app, ["submit", str(config_path), "--experiment", "cli-exp"])
    assert submitted.exit_code == 0, submitted.output
    (run,) = store.list_runs()
    assert f"run {run.id} queued on cpu" in submitted.output
    assert store.get_experiment(run.experiment_id).name == "cli-exp"
    assert run.total_steps == 7

    listed = runner.invoke(app, ["runs"])
    assert listed.exit_code == 0, listed.output
    assert "queued" in listed.output and "0/7" in listed.output

    stopped = runner.invoke(app, ["stop", str(run.id)])
    assert stopped.exit_code == 0, stopped.output
    assert f"run {run.id}: cancelled" in stopped.output
    assert store.get_run(run.id).status == states.CANCELLED


def test_submit_names_the_bad_field_and_stores_nothing(jobs_env, store, tmp_path):
    config = tiny_config()
    config["trainer"]["top_p"] = 3
    config_path = tmp_path / "bad.yaml"
    config_path.write_text(yaml.safe_dump(config))
    result = runner.invoke(app, ["submit", str(config_path)])
    assert result.exit_code == 2
    assert "trainer.top_p" in result.output
    assert store.list_runs() == []


def test_submit_refuses_a_task_off_the_allowlist_and_stores_nothing(jobs_env, store, tmp_path):
    marker = tmp_path / "shell-ran"
    config = tiny_config()
    config["task"] = {"name": "os:system", "params": {"command": f"touch {marker}"}}
    config["agents"][0]["model"] = str(tmp_path / "missing-model")
    config_path = tmp_path / "bad.yaml"
    config_path.write_text(yaml.safe_dump(config))
    result = runner.invoke(app, ["submit", str(config_path), "--experiment", "never-made"])
    assert result.exit_code == 2, result.output
    assert "task.name: task 'os:system' is not allowed" in result.output
    assert not marker.exists()
    assert store.list_runs() == [] and store.find_experiment("never-made") is None
    config["task"] = {"name": "quickstart", "params": {}}  # now only the pre-flight problem is left
    config_path.write_text(yaml.safe_dump(config))
    result = runner.invoke(app, ["submit", str(config_path), "--experiment", "never-made"])
    assert result.exit_code == 2, result.output
    assert f"agents.0.model: folder {tmp_path / 'missing-model'} does not exist" in result.output
    assert store.list_runs() == [] and store.find_experiment("never-made") is None


def test_unknown_device_and_unknown_run_are_clear_errors(jobs_env, tmp_path):
    config_path = tmp_path / "run.yaml"
    config_path.write_text(yaml.safe_dump(tiny_config()))
    result = runner.invoke(app, ["submit", str(config_path), "--device", "gpu"])
    assert result.exit_code == 2 and "cuda:N" in result.output
    missing = runner.invoke(app, ["stop", "999"])
    assert missing.exit_code == 2 and "999" in missing.output
    resume = runner.invoke(app, ["resume", "999"])
    assert resume.exit_code == 2 and "999" in resume.output
    status = runner.invoke(app, ["runs", "--status", "bogus"])
    assert status.exit_code == 2 and "unknown run status 'bogus'" in status.output


def test_ui_and_up_refuse_a_host_that_is_not_an_address(jobs_env):
    for command in ("ui", "up"):
        result = runner.invoke(app, [command, "--host", "http://0.0.0.0:8501"])
        assert result.exit_code == 2, result.output
        assert "--host 'http://0.0.0.0:8501' is not an address" in result.output and "--port" in result.output


def test_db_upgrade_says_which_migrations_ran(tmp_path, monkeypatch):
    """It printed "database up to date" whether it had migrated 0001 to the newest or done nothing."""
    from db.migrate import head_revision, upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0001")
    monkeypatch.setenv("COOPLAB_DATABASE_URL", url)
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    head = head_revision()
    migrated = runner.invoke(app, ["db", "upgrade"])
    assert migrated.exit_code == 0, migrated.output
    ran = ", ".join(f"{n:04d}" for n in range(2, int(head) + 1))
    assert f"(migrated from 0001 to {head}: ran {ran})" in migrated.output
    again = runner.invoke(app, ["db", "upgrade"])
    assert f"database up to date: sqlite:///{tmp_path / 'old.db'} (at {head}; nothing to run)" in again.output
