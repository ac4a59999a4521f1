"""Runs: creation and attempts, listing, stop requests, heartbeats, the lost-run reaper, progress
rates, notes, deletion, checkpoints and workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from db.ops_runs import compute_rate
from db.store import NotFoundError, RunActiveError, Store


def test_create_run_snapshots_config_and_counts_attempts(store: Store, experiment_id: int) -> None:
    config = {"trainer": {"num_train_epochs": 2}}
    first = store.create_run(experiment_id, config, "cuda:0", total_steps=40, device="cuda:0", tags=["a"])
    config["trainer"]["num_train_epochs"] = 99  # the stored snapshot does not follow the caller's dict
    assert first.config == {"trainer": {"num_train_epochs": 2}}
    assert (first.status, first.attempt, first.queue, first.total_steps, first.step) == ("queued", 1, "cuda:0", 40, 0)
    assert first.progress == 0.0 and first.is_active
    second = store.create_run(experiment_id, first.config, "cuda:0", resumed_from=first.id)
    third = store.create_run(experiment_id, first.config, "cuda:0", resumed_from=second.id)
    assert (second.attempt, second.resumed_from, third.attempt) == (2, first.id, 3)


def test_create_run_validates_its_inputs(store: Store, experiment_id: int) -> None:
    other = store.create_experiment("other")
    foreign = store.create_run(other.id, {}, "cpu")
    with pytest.raises(ValueError, match="resume it within its own experiment"):
        store.create_run(experiment_id, {}, "cpu", resumed_from=foreign.id)
    with pytest.raises(ValueError, match="needs a queue name"):
        store.create_run(experiment_id, {}, " ")
    with pytest.raises(NotFoundError, match="no experiment with id 77"):
        store.create_run(77, {}, "cpu")
    with pytest.raises(TypeError, match="config must be a mapping"):
        store.create_run(experiment_id, 5, "cpu")  # type: ignore[arg-type]


def test_list_runs_filters(store: Store, experiment_id: int) -> None:
    other = store.create_experiment("other")
    a = store.create_run(experiment_id, {}, "cpu", tags=["sweep"])
    b = store.create_run(experiment_id, {}, "cpu")
    c = store.create_run(other.id, {}, "cpu")
    store.transition(b.id, "starting")
    assert [r.id for r in store.list_runs()] == [c.id, b.id, a.id]
    assert [r.id for r in store.list_runs(experiment_id)] == [b.id, a.id]
    assert [r.id for r in store.list_runs(statuses=["starting"])] == [b.id]
    assert [r.id for r in store.list_runs(statuses="queued")] == [c.id, a.id]
    assert [r.id for r in store.list_runs(tag="sweep")] == [a.id]
    store.update_experiment(other.id, tags=["sweep"])  # an experiment's tag selects its runs too
    assert [r.id for r in store.list_runs(tag="sweep")] == [c.id, a.id]
    assert store.run_counts_by_status(tag="sweep")["queued"] == 2 and store.run_tags() == ["sweep", "t1"]
    assert [r.id for r in store.list_runs(limit=1)] == [c.id]
    with pytest.raises(ValueError, match="unknown run status 'done'"):
        store.list_runs(statuses=["done"])


def test_request_stop_cancels_queued_and_stops_running(store: Store, experiment_id: int) -> None:
    queued = store.create_run(experiment_id, {}, "cpu")
    cancelled = store.request_stop(queued.id)
    assert (cancelled.status, cancelled.stop_requested) == ("cancelled", True)
    assert cancelled.finished_at is not None

    running = store.create_run(experiment_id, {}, "cpu")
    store.transition(running.id, "starting")
    store.transition(running.id, "running")
    assert store.stop_requested(running.id) is False
    stopping = store.request_stop(running.id)
    assert (stopping.status, stopping.stop_requested) == ("stopping", True)
    assert store.stop_requested(running.id) is True
    assert store.request_stop(running.id).status == "stopping"  # asking twice changes nothing
    assert store.transition(running.id, "stopped").status == "stopped"
    assert store.request_stop(running.id).status == "stopped"  # final runs stay as they are


def test_a_run_records_when_its_stop_was_first_requested(store: Store, experiment_id: int) -> None:
    run = store.create_run(experiment_id, {}, "cpu")
    store.transition(run.id, "starting")
    store.transition(run.id, "running")
    assert store.get_run(run.id).stop_requested_at is None
    before = datetime.now(UTC)
    asked = store.request_stop(run.id).stop_requested_at
    after = datetime.now(UTC)
    assert asked is not None and asked.tzinfo is not None
    # the database may keep microseconds or not; allow for the rounding
    assert before - timedelta(milliseconds=1) <= asked <= after + timedelta(milliseconds=1)
    assert store.request_stop(run.id).stop_requested_at == asked  # asking again keeps the first time
    assert store.transition(run.id, "stopped").stop_requested_at == asked

    queued = store.create_run(experiment_id, {}, "cpu")
    assert store.request_stop(queued.id).stop_requested_at is not None  # cancelled runs record it too


def test_heartbeat_returns_the_stop_flag(store: Store, run_id: int) -> None:
    store.upsert_worker("cpu@h", host="h", devices=["cpu"], queues=["cpu"], pid=1)
    store.transition(run_id, "starting")
    assert store.heartbeat(run_id, worker="cpu@h") is False
    store.request_stop(run_id)
    assert store.heartbeat(run_id) is True
    run = store.get_run(run_id)
    assert run.worker == "cpu@h" and run.heartbeat_at is not None
    with pytest.raises(NotFoundError):
        store.heartbeat(12345)


def test_reap_lost_marks_stale_runs_and_spares_fresh_ones(store: Store, experiment_id: int) -> None:
    def live(status: str) -> int:
        run_id = store.create_run(experiment_id, {}, "cpu").id
        for s in ("starting", "running", "stopping"):
            store.transition(run_id, s)
            if s == status:
                break
        return run_id

    starting, running, stopping, queued = live("starting"), live("running"), live("stopping"), \
        store.create_run(experiment_id, {}, "cpu").id
    store.request_stop(stopping)
    now = datetime.now(UTC)
    assert store.reap_lost(60, now=now) == []  # every heartbeat is fresh
    later = now + timedelta(seconds=120)
    store.heartbeat(running)  # fresh heartbeat at "now": still stale at now + 120 s
    reaped = store.reap_lost(60, now=later)
    assert sorted(reaped) == sorted([starting, running, stopping])
    assert store.get_run(starting).status == "lost"
    assert store.get_run(running).status == "lost"
    assert "no heartbeat for more than 60 s" in store.get_run(running).error
    assert store.get_run(stopping).status == "stopped"  # asked to stop, then its worker went away
    assert store.get_run(queued).status == "queued"  # waiting in the queue is not being lost
    assert store.reap_lost(60, now=later) == []
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        store.reap_lost(0)


def test_reap_lost_spares_a_run_whose_heartbeat_is_recent(store: Store, run_id: int) -> None:
    store.transition(run_id, "starting")
    store.transition(run_id, "running")
    assert store.reap_lost(60, now=datetime.now(UTC) + timedelta(seconds=30)) == []
    assert store.get_run(run_id).status == "running"


def test_compute_rate_by_hand() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    # steps 10 -> 30 in 40 s: 0.5 steps/s; 70 steps left -> 140 s.
    assert compute_rate(30, 100, 10, t0, t0 + timedelta(seconds=40)) == (0.5, 140.0)
    assert compute_rate(30, None, 10, t0, t0 + timedelta(seconds=40)) == (0.5, None)
    assert compute_rate(10, 100, 10, t0, t0 + timedelta(seconds=40)) == (None, None)  # one step only
    assert compute_rate(30, 100, None, None, None) == (None, None)


def test_run_rate_follows_logged_steps(store: Store, run_id: int) -> None:
    assert store.run_rate(run_id).steps_per_s is None
    store.log_step(run_id, 0, 0, {"m": 1.0})
    store.log_step(run_id, 1, 4, {"m": 1.0})
    rate = store.run_rate(run_id)
    assert (rate.first_step, rate.step, rate.total_steps) == (0, 1, 10)
    assert rate.last_step_at >= rate.first_step_at
    if rate.steps_per_s is not None:  # two steps within one clock tick give no rate
        assert rate.steps_per_s > 0 and rate.eta_s == pytest.approx(9 / rate.steps_per_s)


def test_counts_notes_update_and_delete(store: Store, experiment_id: int) -> None:
    a = store.create_run(experiment_id, {}, "cpu")
    b = store.create_run(experiment_id, {}, "cpu")
    store.transition(b.id, "failed", error="bad config: trainer.lr must be > 0")
    counts = store.run_counts_by_status()
    assert counts["queued"] == 1 and counts["failed"] == 1 and counts["running"] == 0
    assert sum(counts.values()) == 2
    noted = store.set_run_notes(b.id, tags=["bug"], notes="lr typo")
    assert (noted.tags, noted.notes) == (("bug",), "lr typo")
    updated = store.update_run(a.id, celery_task_id="abc", log_path="/l/1.log", output_dir="/o/1")
    assert (updated.celery_task_id, updated.log_path, updated.output_dir, updated.worker) == \
        ("abc", "/l/1.log", "/o/1", None)
    with pytest.raises(RunActiveError, match="run .* is queued"):
        store.delete_run(a.id)
    store.add_checkpoint(b.id, 3, "/o/ckpt-3")
    store.delete_run(b.id)
    store.delete_run(a.id, force=True)
    assert store.list_runs() == [] and store.latest_checkpoint(b.id) is None


def test_checkpoints(store: Store, run_id: int) -> None:
    assert store.latest_checkpoint(run_id) is None
    store.add_checkpoint(run_id, 5, "/ck/5")
    store.add_checkpoint(run_id, 2, "/ck/2")
    store.add_checkpoint(run_id, 5, "/ck/5b")
    assert [c.path for c in store.list_checkpoints(run_id)] == ["/ck/2", "/ck/5", "/ck/5b"]
    assert store.latest_checkpoint(run_id).path == "/ck/5b"
    with pytest.raises(NotFoundError):
        store.add_checkpoint(999, 1, "/x")


def test_workers(store: Store, run_id: int) -> None:
    w = store.upsert_worker("cpu@a", host="a", devices=["cpu"], queues=["cpu"], pid=10)
    assert (w.online, w.devices, w.current_run_id) == (True, ("cpu",), None)
    store.upsert_worker("gpu@a", host="a", devices=["cuda:0"], queues=["cuda:0"], pid=11)
    store.set_worker_run("cpu@a", run_id)
    assert store.list_workers()[0].current_run_id == run_id
    store.mark_worker_offline("gpu@a")
    assert [w.name for w in store.list_workers(online_only=True)] == ["cpu@a"]
    stale = store.mark_stale_workers_offline(30, now=datetime.now(UTC) + timedelta(seconds=60))
    assert stale == ["cpu@a"]
    assert store.list_workers(online_only=True) == []
    again = store.upsert_worker("cpu@a", host="a", pid=12)  # a restart re-registers it
    assert (again.online, again.pid) == (True, 12)
    with pytest.raises(NotFoundError, match="upsert_worker first"):
        store.set_worker_run("nobody", None)
