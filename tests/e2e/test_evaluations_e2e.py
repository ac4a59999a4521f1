"""End to end in a real browser: a run trained by ``cooplab up``'s worker is evaluated from its page.
The Evaluations tab's **Evaluate** queues the evaluation on the run's worker; the page shows the
request queued, then (on its own) the stored evaluation in the held-out table, and the request done.
Screenshots go to the folder printed at the start."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

CONFIG = {
    "name": "eval-e2e",
    "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-llama"}],
    "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 2}},
    "trainer": {"max_steps": 2, "num_generations": 2, "max_new_tokens": 8, "eval_interval": 0,
                "checkpoint_interval": 1, "seed": 3},
}


def test_evaluate_a_run_from_its_page(shared_up, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import expect

    from db.eval_request_store import EvalRequestStore
    from db.evaluation_store import EvaluationStore
    from jobs.client import get_store, submit_to_experiment
    from jobs.settings import Settings

    url, home = shared_up  # shared: its experiment has a name of its own
    settings = Settings(home=home)
    store = get_store(settings)
    run_id, _ = submit_to_experiment({**CONFIG, "name": f"eval-e2e {uuid.uuid4().hex[:8]}"}, settings=settings)
    deadline = time.monotonic() + 180
    while store.get_run(run_id).is_active and time.monotonic() < deadline:
        time.sleep(0.5)
    run = store.get_run(run_id)
    assert run.status == "succeeded", run.error

    expect.set_options(timeout=30_000)
    page = browser_page
    page.goto(f"{url}/run_detail?run={run_id}")
    page.get_by_role("tab", name="Evaluations").click()
    expect(page.get_by_text("No evaluations yet")).to_be_visible()
    page.get_by_text("greedy", exact=True).click()  # the checkbox's label
    page.get_by_role("button", name="Evaluate").click()
    queued = page.get_by_text(re.compile(r"Queued evaluation request #\d+ \(checkpoint last\) on cpu"))
    expect(queued).to_be_visible()
    queued_id = int(re.search(r"#(\d+)", queued.inner_text()).group(1))
    page.screenshot(path=str(artifacts / "eval-1-queued.png"), full_page=True)

    # the worker evaluates it; the page notices on its own and shows the stored evaluation
    expect(page.get_by_text("Held-out evaluations", exact=True)).to_be_visible(timeout=180_000)  # not the CSV link
    page.screenshot(path=str(artifacts / "eval-2-stored.png"), full_page=True)
    (request,) = EvalRequestStore(store).list_for_run(run_id)
    assert request.id == queued_id and request.status == "done", request.error
    (stored,) = EvaluationStore(store).list_evaluations(run_id)
    assert request.evaluation_ids == (stored.id,) and stored.checkpoint_step == 2 and stored.settings["greedy"]
    expect(page.get_by_text("open the evaluated episode of item")).to_be_visible()
