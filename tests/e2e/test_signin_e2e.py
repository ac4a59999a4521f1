"""Sign-in in a real browser: ``cooplab ui`` bound to 127.0.0.2 (loopback, yet not 127.0.0.1, so it
asks for the password) with a password hash set. A wrong password is refused, the right one opens the
app, Sign out closes it, and a new visit to a deep link asks again. Screenshots and the log go to
``test-artifacts/e2e-signin/``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.access import hash_password
from tests.e2e.conftest import ROOT, _stop_tree, _wait_healthy

pytestmark = [pytest.mark.browser, pytest.mark.integration]

HOST = "127.0.0.2"
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """This module's own folder (the dashboard test's folder is left alone)."""
    folder = Path(os.environ.get("COOPLAB_E2E_SIGNIN_ARTIFACTS", ROOT / "test-artifacts" / "e2e-signin"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*"):
        old.unlink()
    print(f"\nsign-in browser test screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[str]:
    """``cooplab ui --host 127.0.0.2`` with a password hash and its own data directory; yields the URL."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(tmp_path_factory.mktemp("signin-home")), "OMP_NUM_THREADS": "1",
                "PYTHONPATH": str(ROOT), "COOPLAB_UI_PASSWORD_HASH": hash_password(PASSWORD)})
    log = artifacts / "cooplab-ui.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "ui", "--host", HOST, "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://{HOST}:{port}"
    try:
        _wait_healthy(url, proc, log)
        assert f"Sign-in: required (the dashboard listens on {HOST})" in log.read_text()
        yield url
    finally:
        _stop_tree(proc)


def test_signin_guards_the_dashboard_in_a_browser(dashboard: str, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    page, url = browser_page, dashboard
    with pytest.raises(OSError):  # bound to 127.0.0.2 only
        urllib.request.urlopen(url.replace(HOST, "127.0.0.1") + "/_stcore/health", timeout=2)

    page.goto(url)
    heading = page.get_by_role("heading", name="Sign in to CoopLab")
    expect(heading).to_be_visible()
    expect(page.get_by_test_id("stSidebar")).to_have_count(0)  # no pages, no controls
    expect(page.get_by_role("heading", name="Experiments")).to_have_count(0)
    page.screenshot(path=str(artifacts / "1-signin-form.png"), full_page=True)

    password = page.get_by_label("Password", exact=True)
    password.fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Wrong password: try again.")).to_be_visible()
    expect(page.get_by_role("heading", name="Experiments")).to_have_count(0)
    page.screenshot(path=str(artifacts / "2-wrong-password.png"), full_page=True)

    password.fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Experiments")).to_be_visible()
    expect(heading).to_have_count(0)
    sign_out = page.get_by_test_id("stSidebar").get_by_role("button", name="Sign out")
    expect(sign_out).to_be_visible()
    page.screenshot(path=str(artifacts / "3-signed-in.png"), full_page=True)

    sign_out.click()
    expect(heading).to_be_visible()
    expect(page.get_by_role("heading", name="Experiments")).to_have_count(0)

    page.goto(f"{url}/runs")  # a new visit is a new session: it asks again, then opens the linked page
    expect(heading).to_be_visible()
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    page.screenshot(path=str(artifacts / "4-deep-link.png"), full_page=True)
