"""Markdown in stored names and in the URL, in a real browser: ``cooplab ui`` on a loopback port over a
real SQLite file filled through the store API with names that are markdown images, a "Session expired:
sign in again" link, an HTML link and a backtick. Every page that shows one of those fields is opened
in headless Chromium with every request recorded: each name reads as its literal text, no element
links to or loads from the names' host, and every request went to the dashboard's own server.
Screenshots and the log go to ``test-artifacts/e2e-escaping/``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from db.store import Store
from db.study_store import StudyStore
from jobs.study_space import generate, parse_space
from tests.app.conftest import add_run, two_agent_config
from tests.e2e.conftest import ROOT, _free_port, _stop_tree, _wait_healthy

pytestmark = [pytest.mark.browser, pytest.mark.integration]

EVIL = "evil.test"


def named(field: str) -> str:
    """A name holding an image, a phishing link and an HTML link, each pointing at its own URL."""
    return (f"![x](http://{EVIL}/{field}.png) [Session expired: sign in again](http://{EVIL}/{field}) "
            f'<a href="http://{EVIL}/{field}-tag">{field}</a>')


AGENT, EXPERIMENT, STUDY, WORKER, QUEUE = (named(f) for f in ("agent", "experiment", "study", "worker", "queue"))
CHECKPOINT = f"/data/ck`pt {named('checkpoint')}`/step-2"
QUERY_EXPERIMENT, QUERY_RUN = named("query-experiment"), named("query-run")


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """This module's own folder (the other browser tests' folders are left alone)."""
    base = Path(os.environ.get("COOPLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    folder = Path(os.environ.get("COOPLAB_E2E_ESCAPING_ARTIFACTS", base / "e2e-escaping"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*"):
        old.unlink()
    print(f"\nescaping browser test screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A data directory whose SQLite file holds the hostile names in every field a page shows."""
    home = tmp_path_factory.mktemp("escaping-home")
    store = Store(f"sqlite:///{home / 'cooplab.db'}", migrate=True)
    try:
        experiment = store.create_experiment(EXPERIMENT, config=two_agent_config()).id
        ids = {
            "transcripts": add_run(store, experiment, steps=2, agents=(AGENT, "editor"), episodes_per_step=1),
            "seed_1": add_run(store, experiment, steps=2, config=two_agent_config(seed=1)),
            "seed_2": add_run(store, experiment, steps=2, config=two_agent_config(seed=2)),
            "checkpoint": add_run(store, experiment, status="succeeded", steps=2),
        }
        store.add_checkpoint(ids["checkpoint"], 2, CHECKPOINT)
        ids["queued"] = store.create_run(experiment, two_agent_config(), QUEUE, device="cpu").id
        store.upsert_worker(WORKER, host="box", devices=["cpu"], queues=[QUEUE])
        base = two_agent_config()
        space = {"trainer.agent_learning_rate": [0.001]}
        ids["study"] = StudyStore(store).create_study(STUDY, {"base": base, "space": space},
                                                      generate(base, parse_space(space), seeds=1),
                                                      max_concurrent=1).id
    finally:
        store.close()
    return home, ids


@pytest.fixture(scope="module")
def dashboard(filled: tuple[Path, dict[str, int]], artifacts: Path) -> Iterator[str]:
    """``cooplab ui`` on a free loopback port over the filled data directory; yields its URL."""
    home, _ = filled
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPLAB_")}
    env.update({"COOPLAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
                "COOPLAB_HEARTBEAT_TIMEOUT_S": "600"})
    log = artifacts / "cooplab-ui.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cooplab", "ui", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield url
    finally:
        _stop_tree(proc)


def _foreign(url: str, own: str) -> bool:
    """A network request (http, https, ws, wss) to any host but the dashboard's own."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != own


LINKS_AND_LOADS = """() => {
    const elsewhere = value => {  // a link or source on another host (a same-origin ?experiment=... is fine)
        if (!value) return false;
        const url = new URL(value, document.baseURI);
        return ['http:', 'https:'].includes(url.protocol) ? url.host !== location.host
                                                          : value.includes('evil.test');
    };
    const found = [];
    for (const e of document.querySelectorAll('[src], [srcset], [href], [*|href], [style*="url("]')) {
        const links = [e.getAttribute('src'), e.getAttribute('href'),
                       e.getAttributeNS('http://www.w3.org/1999/xlink', 'href')];
        const loose = [e.getAttribute('srcset'), e.getAttribute('style')];
        if (links.some(elsewhere) || loose.some(v => v && v.includes('evil.test')))
            found.push(e.outerHTML.slice(0, 200));
    }
    return found;
}"""


def test_names_and_query_values_stay_text_in_a_browser(dashboard: str, filled, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    page, url = browser_page, dashboard
    _, ids = filled
    own = urlsplit(url).netloc
    requests: list[str] = []
    page.context.on("request", lambda request: requests.append(request.url))
    page.context.on("websocket", lambda socket: requests.append(socket.url))
    # a request to another host is recorded above, then refused here (no DNS wait on a machine offline)
    page.context.route(lambda u: _foreign(u, own), lambda route: route.abort())

    leaks: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}  # names not shown as their literal text

    def visit(step: str, path: str, shown: list[str], tab: str | None = None) -> None:
        page.goto(f"{url}{path}")
        expect(page.get_by_role("heading", level=1).first).to_be_visible()
        if tab:
            page.get_by_role("tab", name=tab).click()
        for name in shown:  # the name's literal characters (word joiners, invisible, left out)
            try:
                page.wait_for_function("name => document.body.innerText.replaceAll('\\u2060', '').includes(name)",
                                       arg=name, timeout=20_000)
            except PlaywrightTimeout:
                missing.setdefault(step, []).append(name)
        page.wait_for_timeout(1500)  # let images and fragments that would load, load
        page.screenshot(path=str(artifacts / f"{step}.png"), full_page=True)
        if found := page.evaluate(LINKS_AND_LOADS):
            leaks[step] = found  # elements that link to or load from the names' host

    visit("1-transcripts", f"/transcripts?run={ids['transcripts']}", [AGENT])
    visit("2-workers", "/workers", [EXPERIMENT, WORKER, QUEUE])
    visit("3-compare", f"/compare?runs={ids['seed_1']},{ids['seed_2']}", [EXPERIMENT])
    visit("4-studies", f"/studies?study={ids['study']}", [STUDY], tab="Watch and results")
    visit("5-run-detail", f"/run_detail?run={ids['checkpoint']}", [CHECKPOINT], tab="Checkpoints & downloads")
    visit("6-experiment-not-found", f"/?experiment={quote(QUERY_EXPERIMENT)}",
          [f"experiment {QUERY_EXPERIMENT} not found"])
    visit("7-run-not-found", f"/run_detail?run={quote(QUERY_RUN)}", [f"run {QUERY_RUN} not found"])

    foreign = sorted({u for u in requests if _foreign(u, own)})
    assert requests and not foreign and not leaks and not missing, {
        "requests to other hosts": foreign, "elements": leaks, "not shown literally": missing}
