"""``cooplab export mlflow``: a run made in a real SQLite CoopLab database, exported by the CLI to a
real ``mlflow server``, and read back with the MLflow client.

The first export runs ``python -m cooplab`` as a process of its own (the command as a user types it);
the other invocations call the same Typer app in this process (:func:`_cli_here`): each process of its
own imports MLflow anew, and three of them made most of this file's CPU time."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from db import states
from db.evaluation_records import EvaluationInput
from db.evaluation_store import EvaluationStore
from db.migrate import upgrade
from db.store import Store
from db.study_records import TrialInput
from db.study_store import StudyStore
from engine.transcripts import Episode, TurnRecord
from jobs.mlflow_export.mapping import clean_key, flatten_params, mlflow_status
from jobs.settings import Settings
from tests.export.conftest import QUIET_MLFLOW

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CONFIG = {
    "name": "split-alphabet",
    "agents": [
        {"name": "first", "model": "builtin:tiny-llama"},
        {"name": "second", "model": "builtin:tiny-llama"},
    ],
    "task": {"name": "quickstart", "params": {}},
    "trainer": {"algorithm": "magrpo", "max_steps": 4, "agent_learning_rate": 0.001, "seed": 7},
}


def _episode(step: int) -> Episode:
    turn = TurnRecord(1, 0, "first", f"prompt {step}", f"abc {step}", 0.5, 0.5, 0.1)
    return Episode(sample_index=0, split="train", item_index=3, turns=(turn,))


def _attempt(store: Store, run_id: int, steps: range, output_dir: Path, end: str) -> None:
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    store.update_run(run_id, output_dir=str(output_dir), worker="box-a")
    for step in steps:
        store.log_step(
            run_id,
            step,
            step * 8,
            {
                "train/reward_mean": step / 10,
                "train/loss": 1 / step,
                "eval/pass@1": math.nan if step == 2 else step / 8,
            },
            [_episode(step)],
            wall_time=1_700_000_000 + step,
        )
    if end == states.STOPPED:
        store.request_stop(run_id)
    store.transition(run_id, end)


@pytest.fixture
def study_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, int, int]:
    """A study child (point 1, seed 7) that trained steps 1-2, was stopped, and was resumed as a second
    attempt that trained steps 3-4, exported its model and was evaluated: (settings, first, second)."""
    for key in list(os.environ):
        if key.startswith("COOPLAB_") and not key.startswith("COOPLAB_TEST_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    settings = Settings()
    settings.ensure_dirs()
    upgrade(settings.resolved_database_url)
    with Store(settings.resolved_database_url) as store:
        studies = StudyStore(store)
        trial = TrialInput(
            point=1, seed_index=0, seed=7, params={"trainer.agent_learning_rate": 0.001}, config=CONFIG
        )
        study = studies.create_study(
            "lr-sweep", {"base": CONFIG, "method": "grid"}, [trial], queue="cpu", max_concurrent=1
        )
        [first] = studies.claim_slots(study.id)
        _attempt(store, first, range(1, 3), settings.runs_dir / f"run-{first}", states.STOPPED)
        second = store.create_run(study.experiment_id, CONFIG, "cpu", total_steps=4, resumed_from=first).id
        out = settings.runs_dir / f"run-{second}"
        _attempt(store, second, range(3, 5), out, states.SUCCEEDED)
        (out / "model" / "agent_0").mkdir(parents=True)
        (out / "model" / "agent_0" / "config.json").write_text('{"model_type": "llama"}')
        (out / "model" / "agent_0" / "model.safetensors").write_bytes(os.urandom(4096))
        EvaluationStore(store).add_evaluation(
            EvaluationInput(
                run_id=second,
                split="eval",
                settings={"seed": 1, "greedy": True},
                metrics={"eval/reward_mean": 0.75},
                standard_errors={"eval/reward_mean": 0.05},
                per_item=[{"index": 0, "correct": 1}],
                episodes=[],
                checkpoint_step=4,
                checkpoint_path=str(out / "checkpoints" / "checkpoint-4"),
            )
        )
    return settings, first, second


def _cli(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **QUIET_MLFLOW, **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-m", "cooplab", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _cli_here(monkeypatch: pytest.MonkeyPatch, *args: str,
              env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI's Typer app called in this process, with the environment :func:`_cli` gives its process
    (the command's own settings of ``MLFLOW_*`` variables are undone after the test)."""
    from typer.testing import CliRunner

    from cooplab.cmd_export import _MLFLOW_DEFAULTS, _MLFLOW_FORCED
    from cooplab.typer_app import app

    for name in (*_MLFLOW_DEFAULTS, *_MLFLOW_FORCED):  # restored after the test, whatever the command sets
        value = os.environ.get(name)
        monkeypatch.setenv(name, value or "")
        if value is None:
            monkeypatch.delenv(name)
    for name, value in {**QUIET_MLFLOW, **(env_extra or {})}.items():
        monkeypatch.setenv(name, value)
    done = CliRunner().invoke(app, list(args))
    return subprocess.CompletedProcess(["cooplab", *args], done.exit_code, done.stdout, done.stderr)


@pytest.mark.slow
def test_a_run_exported_to_a_real_mlflow_server_reads_back_whole(mlflow_server, study_run, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    settings, first, second = study_run
    done = _cli("export", "mlflow", str(second), "--tracking-uri", mlflow_server.uri, "--experiment", "coop")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"run {second} -> MLflow run ")
    assert (
        "11 params, 6 metric points, artifacts config.json, metrics.csv, transcripts.jsonl, "
        "evaluations.jsonl, model/; " in done.stdout
    )

    client = MlflowClient(tracking_uri=mlflow_server.uri)
    [run] = client.search_runs([client.get_experiment_by_name("coop").experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == f"split-alphabet #{second}"
    assert run.data.params["trainer.seed"] == "7" and run.data.params["agents.1.name"] == "second"
    assert run.data.params == flatten_params(CONFIG)
    tags = run.data.tags
    assert tags["cooplab.run_id"] == str(second) and tags["cooplab.lineage"] == f"{first},{second}"
    assert (tags["cooplab.resumed_from"], tags["cooplab.attempt"], tags["cooplab.seed"]) == (
        str(first),
        "2",
        "7",
    )
    assert (tags["cooplab.study"], tags["cooplab.study_point"], tags["cooplab.worker"]) == (
        "lr-sweep",
        "1",
        "box-a",
    )
    assert json.loads(tags["cooplab.study_params"]) == {"trainer.agent_learning_rate": 0.001}
    history = client.get_metric_history(run.info.run_id, "train/reward_mean")
    assert [(m.step, m.value, m.timestamp) for m in history] == [
        (3, 0.3, 1_700_000_003_000),
        (4, 0.4, 1_700_000_004_000),
    ]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/pass_1")] == [
        3,
        4,
    ]  # "@" is not taken

    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert artifacts == {"config.json", "metrics.csv", "transcripts.jsonl", "evaluations.jsonl", "model"}
    assert [a.path for a in client.list_artifacts(run.info.run_id, "model/agent_0")] == [
        "model/agent_0/config.json",
        "model/agent_0/model.safetensors",
    ]
    local = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "back")))
    assert (local / "model" / "agent_0" / "model.safetensors").read_bytes() == (
        settings.runs_dir / f"run-{second}" / "model" / "agent_0" / "model.safetensors"
    ).read_bytes()
    assert (local / "metrics.csv").read_text().splitlines()[0] == "key,step,env_step,value,wall_time"
    assert [json.loads(line)["step"] for line in (local / "transcripts.jsonl").read_text().splitlines()] == [
        3,
        4,
    ]
    [record] = [json.loads(line) for line in (local / "evaluations.jsonl").read_text().splitlines()]
    assert record["metrics"] == {"eval/reward_mean": 0.75} and record["checkpoint_step"] == 4

    again = _cli_here(
        monkeypatch,
        "export",
        "mlflow",
        str(second),
        str(first),
        "--tracking-uri",
        mlflow_server.uri,
        "--experiment",
        "coop",
    )
    assert again.returncode == 0, again.stderr
    assert f"run {second}: already in MLflow experiment 'coop' as run {run.info.run_id}" in again.stdout
    assert f"run {first} -> MLflow run " in again.stdout
    stopped = client.search_runs(
        [run.info.experiment_id], filter_string=f"tags.`cooplab.run_id` = '{first}'"
    )[0]
    assert stopped.info.status == "KILLED" and stopped.data.tags["cooplab.lineage"] == f"{first},{second}"


def test_a_missing_run_and_a_server_that_is_down_are_named(study_run, monkeypatch):
    closed = "http://127.0.0.1:9"
    missing = _cli_here(monkeypatch, "export", "mlflow", "999", "--tracking-uri", closed)
    assert missing.returncode == 2
    assert (
        missing.stderr == "cooplab export mlflow: no run 999 in the database; `cooplab runs` lists the runs\n"
    )
    down = _cli_here(
        monkeypatch,
        "export",
        "mlflow",
        str(study_run[2]),
        "--tracking-uri",
        closed,
        env_extra={"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"},
    )
    assert down.returncode == 1
    assert down.stderr.startswith(
        f"cooplab export mlflow: run {study_run[2]}: the tracking server {closed} failed: "
    )
    assert len(down.stderr.strip().splitlines()) == 1


def test_config_params_metric_keys_and_statuses_map_to_what_mlflow_takes():
    params = flatten_params({"a": {"b": [1, {"c": None}], "e": {}}, "long": "x" * 7000, "k[0]": True})
    assert params == {"a.b.0": "1", "a.b.1.c": "null", "a.e": "{}", "long": "x" * 5999 + "…", "k_0_": "true"}
    assert clean_key("eval/pass@1 (greedy)") == "eval/pass_1 _greedy_"
    assert [mlflow_status(s) for s in ("succeeded", "failed", "lost", "stopped", "running")] == [
        "FINISHED",
        "FAILED",
        "FAILED",
        "KILLED",
        None,
    ]
