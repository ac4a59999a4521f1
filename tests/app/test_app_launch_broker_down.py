"""Launch from the Experiments page while the broker is down: the run is queued all the same (the
reconciler sends it when the broker answers; tests/jobs/test_jobs_faults.py runs one through a Redis
restart) and the page says it is not sent yet, naming the broker without its password."""

from __future__ import annotations

import socket

from db.store import Store


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_launch_with_the_broker_down_queues_the_run_and_says_it_is_not_sent_yet(app, store: Store,
                                                                                monkeypatch) -> None:
    at = app()
    at.button(key="create_quickstart").click().run()
    port = _free_port()  # nothing listens there
    monkeypatch.setenv("COOPLAB_BROKER_URL", f"redis://:sekret@127.0.0.1:{port}/0")
    at.button(key="exp_launch").click().run()
    assert not at.exception and not at.error
    [run] = store.list_runs()
    assert run.status == "queued" and run.error is None  # was: failed, "could not send run N to the broker"
    [said] = [s.value.replace("\u2060", "") for s in at.success]  # word joiners keep the URL from being linked
    assert said.startswith(f"Queued run #{run.id} on `cpu`. Not sent yet: the broker redis://:***@127.0.0.1:"
                           f"{port}/0 is unreachable"), said
    assert said.endswith("it will be sent when it answers") and "sekret" not in said
