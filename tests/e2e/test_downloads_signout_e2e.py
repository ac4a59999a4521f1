"""Download links in a real browser on a dashboard that requires sign-in (``cooplab ui --host
127.0.0.2`` with a password hash): a link works in the browser that was shown it, not from ``curl``
without that browser's cookie, and no longer once the session has signed out. Screenshots and the log
go to ``test-artifacts/e2e-downloads/``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.access import hash_password
from db.store import Store
from tests.app.conftest import add_run, two_agent_config
from tests.e2e.conftest import ROOT, _stop_tree, _wait_healthy

pytestmark = [pytest.mark.browser, pytest.mark.integration]

HOST = "127.0.0.2"
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def artifacts() -> Path:
    base = Path(os.environ.get("COOPLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    folder = base / "e2e-downloads"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*"):
        old.unlink()
    return folder


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[tuple[str, int]]:
    """A data directory with one finished run, and ``cooplab ui`` on it requiring sign-in; yields
    the URL and the run's id."""
    home = tmp_path_factory.mktemp("downloads-home")
    with Store(f"sqlite:///{home / 'cooplab.db'}", migrate=True) as store:
        experiment = store.create_experiment("downloads", config=two_agent_config()).id
        run_id = add_run(store, experiment, status="succeeded", steps=3)
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
                "COOPLAB_UI_PASSWORD_HASH": hash_password(PASSWORD, n=2**12)})
    log = artifacts / "cooplab-ui.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "ui", "--host", HOST, "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://{HOST}:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url, run_id
    finally:
        _stop_tree(proc)


def _curl(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_download_link_is_bound_to_the_browser_and_revoked_at_sign_out(dashboard, browser_page,
                                                                            artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    (url, run_id), page = dashboard, browser_page
    page.goto(f"{url}/run_detail?run={run_id}")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("tab", name="Checkpoints & downloads").click()
    link = page.locator(f'a[data-testid="cooplab-download"][download="run{run_id}-metrics.csv"]')
    expect(link).to_be_visible()
    page.screenshot(path=str(artifacts / "1-links.png"), full_page=True)
    href = url + link.get_attribute("href")

    fetched = page.request.get(href)  # the browser's own cookies go with it
    assert fetched.status == 200 and fetched.text().startswith("key,step,env_step,value,wall_time\n")
    assert _curl(href) == 403  # the same link without the browser's cookie: the guard wants a signed-in browser

    page.get_by_test_id("stSidebar").get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to CoopLab")).to_be_visible()
    after = page.request.get(href)
    assert after.status == 403 and "Sign in" in after.text()  # signed out, even for the same browser
    page.screenshot(path=str(artifacts / "2-signed-out.png"), full_page=True)
