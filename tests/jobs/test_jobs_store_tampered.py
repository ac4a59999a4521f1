"""A tampered completion marker in a real shared store (a ``file://`` share and a SeaweedFS bucket): a
run's checkpoint and log are stored, the machine that wrote them loses its disk, and someone with write
access to the store adds a file entry that leaves the folder (toward a ``.pth`` in a Python
installation). A resumed attempt on another machine, a queued evaluation and the run's page all fail
naming the marker, and no file outside the cache is written or deleted."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from db import states
from db.eval_request_store import EvalRequestStore
from jobs.artifacts.location import checkpoint_key, logs_key
from jobs.eval_job import execute_evaluation
from jobs.eval_queue import queue_evaluation
from jobs.executor import execute_run, run_output_dir
from jobs.settings import Settings
from tests.app.conftest import MAIN, server_address  # noqa: F401 (fixture)
from tests.artifacts.conftest import new_bucket, s3_client, s3_server  # noqa: F401 (fixtures)
from tests.artifacts.fake_training import FakeTraining
from tests.artifacts.job_env import use_s3
from tests.jobs.helpers import tiny_config

pytestmark = pytest.mark.integration


def _file_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request) -> tuple[Settings, Callable]:
    share = tmp_path / "share"
    share.mkdir()
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"file://{share}")
    monkeypatch.setenv("COOPLAB_ARTIFACTS_TRIES", "2")
    monkeypatch.setenv("COOPLAB_ARTIFACTS_RETRY_BASE_S", "0.05")

    def tamper(key: str, edit: Callable[[dict], None]) -> None:
        marker = share / ".complete" / f"{key}.json"
        body = json.loads(marker.read_bytes())
        edit(body)
        marker.write_text(json.dumps(body))

    return Settings(), tamper


def _bucket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request) -> tuple[Settings, Callable]:
    server = request.getfixturevalue("s3_server")
    bucket = new_bucket(server)
    client = s3_client(server)

    def tamper(key: str, edit: Callable[[dict], None]) -> None:
        name = f"lab/.complete/{key}.json"
        body = json.loads(client.get_object(Bucket=bucket, Key=name)["Body"].read())
        edit(body)
        client.put_object(Bucket=bucket, Key=name, Body=json.dumps(body).encode())

    return use_s3(monkeypatch, server, bucket, tries=2), tamper


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("open_share", [_file_share, _bucket], ids=["file-share", "seaweedfs"])
def test_a_tampered_marker_fails_resume_evaluation_and_the_run_page_and_touches_nothing(
        open_share, jobs_env, store, experiment_id, tmp_path, monkeypatch, request, server_address):  # noqa: F811
    settings, tamper = open_share(tmp_path, monkeypatch, request)
    first = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(first.id, settings=settings, store=store, train_fn=FakeTraining(range(1, 3))) == \
        states.SUCCEEDED
    shutil.rmtree(run_output_dir(settings, first.id))  # the machine that trained it lost its disk
    Path(store.get_run(first.id).log_path).unlink()

    python = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    python.mkdir(parents=True)
    (python / "distutils-precedence.pth").write_text("import os\n")
    installed = _tree(tmp_path / "venv")
    escape = "../" * 30 + str(python / "zzz-cooplab.pth").lstrip("/")
    for key in (checkpoint_key(first.id, 2), logs_key(first.id)):
        tamper(key, lambda body: body["files"].append({"path": escape, "size": 41, "md5": "0" * 32,
                                                       "etag": "0" * 32}))
    marker = rf"completion marker \.complete/{checkpoint_key(first.id, 2)}\.json was refused: file 2: path"

    other = settings.model_copy(update={"home": tmp_path / "home-b", "database_url": settings.resolved_database_url})
    other.ensure_dirs()
    resumed = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=first.id)
    training = FakeTraining(range(3, 4))
    assert execute_run(resumed.id, settings=other, store=store, train_fn=training) == states.FAILED
    error = store.get_run(resumed.id).error
    assert training.resumed_from is None
    assert "TamperedMarker" in error.splitlines()[0] and re.search(marker, error), error

    evaluation = queue_evaluation(first.id, checkpoint="last", settings=other, store=store)
    assert execute_evaluation(evaluation.id, settings=other, store=store) == "failed"
    assert re.search(marker, EvalRequestStore(store).get(evaluation.id).error)

    monkeypatch.setenv("COOPLAB_HOME", str(other.home))  # the dashboard of the other machine
    monkeypatch.setenv("COOPLAB_DATABASE_URL", settings.resolved_database_url)
    page = AppTest.from_file(MAIN, default_timeout=30)
    page.query_params["run"] = str(first.id)
    page.query_params["tab"] = "Logs"  # the log's refusal shows on its tab (tabs are computed when open)
    page.switch_page("app_pages/run_detail.py")
    page.run()
    warnings = " ".join(w.value for w in page.warning)
    assert f".complete/{logs_key(first.id)}.json was refused" in warnings.replace("\\", ""), warnings
    assert not page.exception

    assert _tree(tmp_path / "venv") == installed  # nothing written or deleted where the entries pointed
    cache = other.artifacts_cache_dir
    assert not cache.exists() or _tree(cache) == {}
