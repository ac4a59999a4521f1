"""Fixtures for the browser tests: ``cooplab up`` (dashboard + a real worker) in a private data
directory, and a headless Debian Chromium driven by Playwright (never a downloaded browser).

What is costly is started once per pytest process and shared by the browser test files that run in it
(``make test`` deals this folder to one process as a whole, see tests/suite_schedule.py):

- one Chromium; each test file gets a browser context of its own (:func:`browser_page`: a fresh
  profile, so no file sees another's cookies, sign-in or session);
- one ``cooplab up`` on a data directory of its own (:func:`shared_up`) for the files that need
  nothing special of it; each makes its own experiment under a name of its own and finds its runs,
  requests and experiments by id, never by their place in the store, so the files pass in any order.

Both stop as soon as the process's next test lies outside tests/e2e (and at the end of the session).
A file that needs a dashboard of its own (an empty data directory for the first visit, sign-in, a
filled or hostile store) starts it in a module fixture (:func:`cooplab_up`, the files' ``dashboard``).
Per file, starting ``cooplab up`` cost about 10 s of CPU time and Chromium about 3 s."""

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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1400, "height": 1000}


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


def start_up(home: Path, log: Path) -> tuple[str, subprocess.Popen]:
    """``cooplab up`` (dashboard and a worker) on a free port over ``home``, answering; (URL, process)."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
                "COOPLAB_HEARTBEAT_TIMEOUT_S": "60", "COOPLAB_STOP_GRACE_S": "20"})
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "up", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
    except BaseException:
        _stop_tree(proc)
        raise
    return url, proc


class _ProcessShared:
    """What the browser test files of one pytest process share, each started on first use: Chromium and
    one ``cooplab up`` (its log in ``e2e-shared`` beside the screenshot folders). :meth:`close` stops
    whatever was started; calling it again does nothing."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._closers: list[Callable[[], None]] = []
        self._browser: object | None = None
        self._up: tuple[str, Path] | None = None

    def browser(self) -> object:
        if self._browser is None:
            if not Path(CHROMIUM).exists():
                pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (make test does)")
            from playwright.sync_api import sync_playwright

            playwright = sync_playwright().start()
            self._closers.append(playwright.stop)
            self._browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            self._closers.append(self._browser.close)
        return self._browser

    def up(self) -> tuple[str, Path]:
        if self._up is None:
            logs = artifacts_base() / "e2e-shared"
            logs.mkdir(parents=True, exist_ok=True)
            home = self._tmp.mktemp("cooplab-shared-home")
            url, proc = start_up(home, logs / "cooplab-up.log")
            self._closers.append(lambda: _stop_tree(proc))
            self._up = url, home
        return self._up

    def close(self) -> None:
        self._browser = self._up = None
        while self._closers:
            with contextlib.suppress(Exception):  # a browser or server already gone: nothing left to stop
                self._closers.pop()()


_SHARED = pytest.StashKey[_ProcessShared]()


def artifacts_base() -> Path:
    """``COOPLAB_TEST_ARTIFACTS`` (``make test`` sets it), else ``test-artifacts/``."""
    return Path(os.environ.get("COOPLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go (printed, so a CI log shows where to find them): ``COOPLAB_E2E_ARTIFACTS``,
    else ``e2e-dashboard`` under :func:`artifacts_base`. Emptied once per pytest process; each test file
    names its screenshots its own way."""
    folder = Path(os.environ.get("COOPLAB_E2E_ARTIFACTS", artifacts_base() / "e2e-dashboard"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"\nbrowser test screenshots: {folder}")
    return folder


@pytest.fixture(scope="session")
def _process_shared(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[_ProcessShared]:
    shared = _ProcessShared(tmp_path_factory)
    request.config.stash[_SHARED] = shared
    yield shared
    shared.close()


@pytest.hookimpl(trylast=True)  # after the module fixtures' teardown (the browser contexts)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared browser and ``cooplab up`` once this process is done with the browser tests."""
    if nextitem is None or Path(nextitem.path).parent != HERE:
        shared = item.config.stash.get(_SHARED, None)
        if shared is not None:
            shared.close()


@pytest.fixture(scope="module")
def browser_page(_process_shared: _ProcessShared) -> Iterator[object]:
    """A page of this test file's own browser context (a fresh profile: no other file's cookies or
    session) in the process's headless Debian Chromium."""
    context = _process_shared.browser().new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        yield page
    finally:
        context.close()


@pytest.fixture(scope="module")
def shared_up(_process_shared: _ProcessShared) -> tuple[str, Path]:
    """The process's shared ``cooplab up``: (dashboard URL, data directory). Other test files use it too:
    make what the test needs under a name of its own, and find it by id."""
    return _process_shared.up()


def create_quickstart(home: Path, name: str) -> int:
    """The quick-start experiment, as the first visit's button makes it, under ``name`` in ``home``'s
    store (a shared dashboard's experiments need names of their own); returns its id."""
    from app.commands import create_experiment
    from app.context import preset_config
    from jobs.client import get_store
    from jobs.settings import Settings

    return create_experiment(get_store(Settings(home=home)), {**preset_config("quickstart"), "name": name}).id


@pytest.fixture(scope="module")
def cooplab_up(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[str]:
    """``cooplab up`` of this test file's own on a free port with an empty data directory of its own (the
    first visit's welcome); yields the dashboard URL."""
    url, proc = start_up(tmp_path_factory.mktemp("cooplab-home"), artifacts / "cooplab-up.log")
    try:
        yield url
    finally:
        _stop_tree(proc)
