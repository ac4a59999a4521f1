"""A live run whose job cannot reach the artifact store: its page and the Workers page say "store
unreachable since ..." with the store's error, and stop saying it once the job notes the store answers."""

from __future__ import annotations

from db.store import Store

PROBLEM = "artifact store s3://lab/cooplab at http://127.0.0.1:9 failed uploading runs/run-1/x after 3 tries: " \
          "EndpointConnectionError: Could not connect"


def _warnings(at) -> list[str]:
    return [w.value for w in at.warning if "store unreachable since" in w.value]


def test_the_run_page_and_the_workers_page_show_a_store_outage(app, store: Store, experiment: int, seed) -> None:
    store.upsert_worker("cpu@box", host="box", devices=["cpu"], queues=["cpu"], pid=42)
    running = seed(experiment, status="running", steps=2)
    ended = seed(experiment, status="failed", steps=1)
    store.note_store_outage(running, PROBLEM)
    store.note_store_outage(running, PROBLEM)  # noted again: the first time is kept
    store.note_store_outage(ended, PROBLEM)  # an ended run's note is not shown
    since = store.store_outages()[running].since

    at = app("run_detail", run=running)
    assert not at.exception
    [line] = _warnings(at)
    assert line.startswith(f"Artifact store unreachable since {since:%H:%M:%S} UTC (") and "EndpointConnectionError" in line

    at = app("workers")
    assert not at.exception
    [line] = _warnings(at)
    assert line.startswith(f"Run #{running} on ") and "EndpointConnectionError" in line

    store.note_store_outage(running, None)  # the store answers again
    assert _warnings(app("workers")) == []
