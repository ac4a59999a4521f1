"""Stops that arrive at awkward moments: while a job is starting, and long before the enforcer looks.

The races are placed deterministically (the stop is requested from inside the claim or the build
step), never by sleeping and hoping.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from db import states
from db.store import Store
from jobs.client import stop_run, submit_run
from jobs.db_sink import DbSink
from jobs.executor import execute_run
from jobs.maintenance import StopEnforcer
from tests.jobs.helpers import tiny_config


class StopRightAfterClaim(Store):
    """The real store, with a stop requested the moment the executor claims the run
    (``queued → starting``): the dashboard's Stop button pressed while the job starts."""

    def transition(self, run_id: int, to: str, **kwargs: Any):  # type: ignore[override]
        moved = super().transition(run_id, to, **kwargs)
        if to == states.STARTING:
            self.request_stop(run_id)
        return moved


def test_a_stop_during_the_claim_ends_the_run_stopped_without_building_anything(jobs_env, experiment_id):
    calls: list[object] = []
    with StopRightAfterClaim(jobs_env.resolved_database_url) as store:
        run = store.create_run(experiment_id, tiny_config(), "cpu")
        status = execute_run(run.id, settings=jobs_env, store=store, train_fn=lambda *a, **k: calls.append(a))
        assert status == states.STOPPED
        ended = store.get_run(run.id)
    assert calls == []  # never trained
    assert (ended.status, ended.step, ended.started_at, ended.error) == (states.STOPPED, 0, None, None)
    assert ended.stop_requested and ended.finished_at is not None


@pytest.mark.slow
def test_a_stop_while_the_trainer_is_built_stops_before_the_first_step(jobs_env, store, experiment_id):
    """The stop lands after the executor's own check, while agents and task are being built: the
    sink's ``starting → running`` is refused with ``current == "stopping"``, which means "stop now"."""
    from engine.build.run import run_training

    run = store.create_run(experiment_id, tiny_config(max_steps=5), "cpu")
    results: list[Any] = []

    def stop_during_build(config: Any, **kwargs: Any) -> Any:
        assert store.get_run(run.id).status == states.STARTING
        store.request_stop(run.id)
        results.append(run_training(config, **kwargs))
        return results[-1]

    assert execute_run(run.id, settings=jobs_env, store=store, train_fn=stop_during_build) == states.STOPPED
    (result,) = results
    assert (result.status, result.step) == ("stopped", 0)
    ended = store.get_run(run.id)
    assert (ended.status, ended.step, ended.started_at, ended.error) == (states.STOPPED, 0, None, None)
    assert store.metric_keys(run.id) == [] and store.episodes(run.id) == []
    # the trainer saved the state it stopped with; a resumed attempt would start from it
    assert [c.step for c in store.list_checkpoints(run.id)] == [0]


def test_the_sink_turns_a_refused_start_into_a_stop(store, experiment_id):
    for settle in ("stopping", "stopped"):
        run = store.create_run(experiment_id, {}, "cpu")
        store.transition(run.id, states.STARTING)
        store.request_stop(run.id)
        if settle == "stopped":
            store.transition(run.id, states.STOPPED)
        sink = DbSink(store, run.id, heartbeat_interval_s=30)
        sink.start(3, {})
        sink.close()
        assert store.get_run(run.id).status == settle
        assert sink.should_stop() is True


def test_the_grace_period_counts_from_the_stop_request_not_from_when_the_enforcer_noticed(
        jobs_env, store, experiment_id):
    run_id = submit_run(tiny_config(), experiment_id=experiment_id, settings=jobs_env)
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    stop_run(run_id, settings=jobs_env)
    asked = store.get_run(run_id).stop_requested_at
    assert asked is not None
    enforcer = StopEnforcer()  # a fresh enforcer first sees the run 8 s after the stop was asked for
    assert enforcer.enforce(store, None, grace_s=10, now=asked + timedelta(seconds=8)) == []
    assert store.get_run(run_id).status == states.STOPPING
    # 10.5 s after the request (2.5 s after the enforcer first saw it) the grace period is over
    assert enforcer.enforce(store, None, grace_s=10, now=asked + timedelta(seconds=10.5)) == [run_id]
    run = store.get_run(run_id)
    assert run.status == states.STOPPED and "10 s grace period" in run.error
