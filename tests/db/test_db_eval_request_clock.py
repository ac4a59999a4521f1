"""Evaluation requests' heartbeats are stamped and judged on the database server's clock: a process whose
wall clock is shifted (``tests/jobs/skewed_clock``; the system clock, and so the database's, stay as
they are) claims a request and beats for it, and this process, on the true clock, reaps stale ones."""

from __future__ import annotations

import time

from db.eval_request_store import EvalRequestStore
from db.store import Store

TIMEOUT_S = 3.0
OPTIONS = {"split": "eval", "items": 2, "samples": None, "greedy": True, "seed": None, "team_analysis": False,
           "metric": "eval/reward_mean"}
IN_PROCESS = "from db.eval_request_store import EvalRequestStore\nrequests = EvalRequestStore(store)\n"


def test_a_request_beating_from_a_clock_120_s_behind_is_not_reaped(skewed, store: Store, run_id: int):
    """Before: ``heartbeat_at`` was the job's clock, 120 s in the past, and the first reader on a true
    clock failed the healthy request at once ("no heartbeat for more than 3 s")."""
    requests = EvalRequestStore(store)
    request = requests.create(run_id, checkpoint="last", options=OPTIONS, queue="cpu")
    skewed(store.url, -120, IN_PROCESS + f"assert requests.claim({request.id}, worker='w@slow')\n"
                                                     f"assert requests.heartbeat({request.id})")
    assert requests.reap_stale(TIMEOUT_S) == []
    assert requests.get(request.id).status == "running"


def test_a_dead_job_60_s_ahead_is_reaped_after_the_timeout_not_60_s_later(skewed, store: Store, run_id: int):
    """Before: its last heartbeat was stamped 60 s in the future, so its request stayed ``running`` for
    timeout + 60 s after the job died."""
    requests = EvalRequestStore(store)
    request = requests.create(run_id, checkpoint="last", options=OPTIONS, queue="cpu")
    skewed(store.url, +60, IN_PROCESS + f"assert requests.claim({request.id}, worker='w@fast')\n"
                                                    f"assert requests.heartbeat({request.id})")
    t0 = time.monotonic()
    while not requests.reap_stale(TIMEOUT_S):
        assert time.monotonic() - t0 < TIMEOUT_S + 5, "not reaped within the heartbeat timeout"
        time.sleep(0.2)
    reaped = requests.get(request.id)
    assert reaped.status == "failed" and "no heartbeat" in reaped.error
    assert reaped.started_at <= reaped.heartbeat_at <= reaped.finished_at  # all on one clock
