"""Liveness times come from the database server's clock, never from the clock of the process that
writes or reads them: a process whose wall clock is shifted (``tests/jobs/skewed_clock``; the system
clock, and so the database's, stay as they are) writes heartbeats, stop requests, worker sightings and
run creations, and this process, on the true clock, judges them.

The skewed writer is one Python process per test module (the ``skewed`` fixture,
``tests/db/skewed_writer.py``), started once (importing the store costs about 0.8 s of CPU time, and 14
such starts made most of this file's time); for each write it is told its shift, checks that its "now"
reads that far off, and opens a store of its own on the test's database."""

from __future__ import annotations

import time

import pytest

from db import states
from db.store import Store

TIMEOUT_S = 3.0
LOST_TIMEOUT_S = 1.0
"""The liveness timeout of the tests that wait for it to pass: short, as the skews they check are 60 s."""


def _running(store: Store, run_id: int) -> None:
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)


def test_a_heartbeat_from_a_clock_120_s_behind_is_fresh(skewed, store: Store, run_id: int):
    """Before: ``heartbeat_at`` was the writer's clock, 120 s in the past, and the first reaper on a true
    clock marked the healthy run ``lost`` at once."""
    _running(store, run_id)
    skewed(store.url, -120, f"store.heartbeat({run_id}, live_only=True)")
    assert store.reap_lost(TIMEOUT_S) == []
    assert store.get_run(run_id).status == states.RUNNING


def test_a_killed_writer_60_s_ahead_is_lost_after_the_timeout_not_60_s_later(skewed, store: Store, run_id: int):
    """Before: its last heartbeat was stamped 60 s in the future, so the run was reaped only after
    timeout + 60 s."""
    _running(store, run_id)
    skewed(store.url, +60, f"store.heartbeat({run_id}, live_only=True)")
    t0 = time.monotonic()
    while not store.reap_lost(LOST_TIMEOUT_S):
        assert time.monotonic() - t0 < LOST_TIMEOUT_S + 5, "not reaped within the heartbeat timeout"
        time.sleep(0.1)
    assert store.get_run(run_id).status == states.LOST


def test_a_stop_asked_from_a_clock_60_s_behind_still_gets_its_grace(skewed, store: Store, run_id: int):
    """Before: ``stop_requested_at`` was 60 s in the past, so an enforcer with a 30 s grace terminated
    the run at once."""
    from jobs.maintenance import StopEnforcer

    _running(store, run_id)
    skewed(store.url, -60, f"store.request_stop({run_id})")
    assert store.get_run(run_id).status == states.STOPPING
    assert StopEnforcer().enforce(store, None, grace_s=30) == []
    assert store.get_run(run_id).status == states.STOPPING


def test_a_worker_60_s_ahead_goes_offline_after_the_timeout(skewed, store: Store):
    """Before: its ``last_seen`` was 60 s in the future, so it stayed online 60 s after it died."""
    skewed(store.url, +60, "store.upsert_worker('w@far', host='far', queues=['cpu'])")
    t0 = time.monotonic()
    while not store.mark_stale_workers_offline(LOST_TIMEOUT_S):
        assert time.monotonic() - t0 < LOST_TIMEOUT_S + 5, "the dead worker is still online"
        time.sleep(0.1)
    assert not store.list_workers()[0].online


@pytest.mark.parametrize("shift_s", [-90.0, 45.0])
def test_a_worker_s_clock_skew_is_measured_and_stored(skewed, store: Store, shift_s: float):
    skewed(store.url, shift_s, "store.upsert_worker('w@skewed', host='skewed', queues=['cpu'])")
    worker = store.list_workers()[0]
    assert worker.clock_skew_s == pytest.approx(shift_s, abs=2.0)


def test_a_run_created_by_a_clock_120_s_behind_is_not_old_for_the_reconciler(skewed, store: Store, experiment_id: int):
    """Before: ``created_at`` was 120 s in the past, so the reconciler took a run just submitted for one
    whose message the broker lost (it waits ``min_age_s`` before re-sending)."""
    from jobs.reconcile import Reconciler

    out = skewed(store.url, -120, f"print(store.create_run({experiment_id}, {{}}, 'cpu').id)")
    run_id = int(out.strip())
    assert [r.id for r in store.list_runs(statuses=[states.QUEUED])] == [run_id]
    assert Reconciler().queued_old_enough(store, min_age_s=10) == []
