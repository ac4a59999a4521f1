"""Fixtures for the browser test: ``cooplab up`` (dashboard + a real worker) in a private data
directory, and a headless Debian Chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"cooplab up exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the dashboard did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """Where screenshots go (printed, so a CI log shows where to find them): ``COOPLAB_E2E_ARTIFACTS``,
    else ``e2e-dashboard`` under ``COOPLAB_TEST_ARTIFACTS`` (``make test`` sets it), else under
    ``test-artifacts/``."""
    base = Path(os.environ.get("COOPLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    folder = Path(os.environ.get("COOPLAB_E2E_ARTIFACTS", base / "e2e-dashboard"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"\nbrowser test screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def cooplab_up(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[str]:
    """``cooplab up`` on a free port with its own data directory; yields the dashboard URL."""
    home = tmp_path_factory.mktemp("cooplab-home")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
                "COOPLAB_HEARTBEAT_TIMEOUT_S": "60", "COOPLAB_STOP_GRACE_S": "20"})
    log = artifacts / "cooplab-up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "up", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url
    finally:
        _stop_tree(proc)


def _stop_tree(proc: subprocess.Popen) -> None:
    """Kill ``cooplab up`` (or ``cooplab ui``) and every process under it at once: the browser tests are
    done with it, and its orderly stop on SIGTERM (dashboard, then the worker and its run) is tested by
    tests/jobs/test_jobs_up.py; waiting for it here cost about 6 s per test file."""
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    for process in [proc, *children]:  # the dashboard and the worker run in sessions of their own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(children, timeout=10)


@pytest.fixture(scope="module")
def browser_page(artifacts: Path) -> Iterator[object]:
    """A fresh page in headless Debian Chromium."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            yield page
        finally:
            browser.close()
