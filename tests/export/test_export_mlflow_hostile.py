"""``cooplab export mlflow`` against a tracking server that lies: it never writes where a server's
artifact location points on this machine (artifacts go only through the tracking server's own
artifact API), and never shows the tracking URI's password (issue #38, item 6).

The server is the in-process fake of ``fake_mlflow.py``; the export runs in this process (CliRunner).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from db import states
from db.migrate import upgrade
from db.store import Store
from jobs.settings import Settings
from tests.export.conftest import QUIET_MLFLOW
from tests.export.fake_mlflow import API, RUN_ID, FakeMlflow, serving

PASSWORD = "s3cret-Pw"  # noqa: S105 - the secret the output must never show
CONFIG = {"name": "tiny", "agents": [{"name": "a", "model": "builtin:tiny-llama"}], "trainer": {"seed": 3}}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export-db") / "cooplab.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def one_run(tmp_path: Path, migrated: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """A succeeded run with two metric points and a final model folder, in a database of its own."""
    for key in list(os.environ):
        if key.startswith(("COOPLAB_", "MLFLOW_")) and not key.startswith("COOPLAB_TEST_"):
            monkeypatch.delenv(key)
    for key, value in {**QUIET_MLFLOW, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}.items():
        monkeypatch.setenv(key, value)
    for key in ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "MLFLOW_HTTP_REQUEST_TIMEOUT",
                "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"):
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)  # restored (removed) after the test, whatever the command sets
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    settings = Settings()
    settings.ensure_dirs()
    shutil.copy(migrated, settings.data_dir / "cooplab.db")
    with Store(settings.resolved_database_url) as store:
        experiment = store.create_experiment("coop")
        run = store.create_run(experiment.id, CONFIG, "cpu", total_steps=2).id
        store.transition(run, states.STARTING)
        store.transition(run, states.RUNNING)
        out = settings.runs_dir / f"run-{run}"
        store.update_run(run, output_dir=str(out))
        for step in (1, 2):
            store.log_step(run, step, step, {"train/loss": 1 / step}, wall_time=1_700_000_000 + step)
        store.transition(run, states.SUCCEEDED)
    (out / "model" / "agent_0").mkdir(parents=True)
    (out / "model" / "agent_0" / "weights #1.bin").write_bytes(b"\x00weights")
    return run


@pytest.fixture
def fake() -> Iterator[FakeMlflow]:
    with serving(FakeMlflow()) as server:
        yield server


def _export(run_id: int, uri: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
            *extra: str) -> tuple[int, str]:
    """Run the command in this process: its exit code and everything it printed or logged."""
    from cooplab.cli import app

    caplog.set_level("DEBUG")
    done = CliRunner().invoke(app, ["export", "mlflow", str(run_id), "--tracking-uri", uri, *extra])
    captured = capfd.readouterr()
    shown = done.output + captured.out + captured.err + caplog.text
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        shown += repr(done.exception)
    return done.exit_code, shown


def _with_password(fake: FakeMlflow) -> str:
    return f"http://cooplab:{PASSWORD}@{fake.base}"


@pytest.mark.parametrize("where", ["file", "bare path"])
def test_a_server_given_local_artifact_location_is_refused_and_nothing_is_written_there(
    one_run, fake, tmp_path, capfd, caplog, where
):
    target = tmp_path / "elsewhere" / "artifacts"
    fake.artifact_uri = target.as_uri() if where == "file" else str(target)
    code, shown = _export(one_run, _with_password(fake), capfd, caplog)
    assert not (tmp_path / "elsewhere").exists()
    assert code == 1, shown
    assert PASSWORD not in shown
    assert "is not the tracking server's artifact API" in shown and str(target) in shown
    assert fake.deleted == [RUN_ID]  # the run it made is not left behind, looking exported
    assert fake.paths("PUT") == []


def test_a_run_location_asked_again_is_not_used(one_run, fake, tmp_path, capfd, caplog):
    """The location checked at create-run is the one used: a get-run answering another is never asked."""
    fake.get_artifact_uri = (tmp_path / "elsewhere").as_uri()
    code, shown = _export(one_run, _with_password(fake), capfd, caplog)
    assert code == 0, shown
    assert not (tmp_path / "elsewhere").exists()
    assert sorted(fake.uploads) == [
        f"1/{RUN_ID}/artifacts/{name}"
        for name in ("config.json", "metrics.csv", "model/agent_0/weights #1.bin")  # no empty files
    ]
    assert fake.uploads[f"1/{RUN_ID}/artifacts/model/agent_0/weights #1.bin"] == b"\x00weights"
    assert {auth for method, _, auth in fake.requests} == {f"cooplab:{PASSWORD}"}  # sent, never shown
    assert PASSWORD not in shown
    assert f"http://cooplab:***@{fake.base}/#/experiments/1/runs/{RUN_ID}" in shown


def test_an_experiment_stored_outside_the_server_is_refused_before_a_run_is_made(
    one_run, fake, capfd, caplog
):
    fake.experiment_exists = True
    fake.experiment_location = "s3://someone-elses-bucket/1"
    code, shown = _export(one_run, _with_password(fake), capfd, caplog)
    assert code == 1, shown
    assert "experiment 'coop' keeps its artifacts at 's3://someone-elses-bucket/1'" in shown
    assert f"{API}/runs/create" not in fake.paths("POST") and PASSWORD not in shown


def test_a_server_that_fails_is_named_without_its_password(one_run, capfd, caplog):
    code, shown = _export(one_run, f"http://cooplab:{PASSWORD}@127.0.0.1:9", capfd, caplog)
    assert code == 1, shown
    assert "the tracking server http://cooplab:***@127.0.0.1:9 failed: " in shown
    assert PASSWORD not in shown


@pytest.mark.parametrize("uri", ["sqlite:///{tmp}/mlflow.db", "file://{tmp}/mlruns", "{tmp}/mlruns"])
def test_a_tracking_uri_that_is_not_a_server_is_refused_and_creates_nothing(
    one_run, tmp_path, capfd, caplog, monkeypatch, uri
):
    """MLflow's local stores put artifacts where the store says (a new SQLite store: ./mlruns)."""
    folder, here = tmp_path / "local", tmp_path / "cwd"
    folder.mkdir()
    here.mkdir()
    monkeypatch.chdir(here)
    code, shown = _export(one_run, uri.format(tmp=folder), capfd, caplog)
    assert code == 2, shown
    assert "give an MLflow tracking server (http:// or https://)" in shown
    assert list(folder.iterdir()) == [] and list(here.iterdir()) == []
