"""A stop that arrives while the run's checkpoints are still being stored: the grace period counts from
the job's last stored file, so an upload that makes progress is never cut off, and one that stalls is
terminated after the grace period like a hung step.

The job runs in this process against a real shared-folder store (``file://``) whose writes are slowed
(a slow link); a stop enforcer polls beside it as a worker's maintenance pass would.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from db import states
from db.engine import write_session
from db.models import RunRow
from jobs.artifacts.backend_fs import FolderBackend
from jobs.artifacts.storing_marks import StoringMarks
from jobs.executor import execute_run
from jobs.maintenance import StopEnforcer, grace_start
from jobs.settings import Settings
from tests.artifacts.fake_training import FakeTraining
from tests.jobs.helpers import tiny_config

# ------------------------------------------------------------------------------ pure rules


def test_the_grace_starts_at_the_later_of_the_stop_request_and_the_last_stored_file():
    asked = datetime(2026, 12, 5, 10, 0, 0, tzinfo=UTC)
    assert grace_start(asked, None) == (asked, False)
    assert grace_start(asked, asked - timedelta(seconds=5)) == (asked, False)  # stored before the stop
    assert grace_start(asked, asked) == (asked, False)
    later = asked + timedelta(seconds=25)
    assert grace_start(asked, later) == (later, True)


def test_marks_are_written_at_most_once_per_interval_and_a_failing_one_is_only_logged(caplog):
    clock = [100.0]
    notes: list[float] = []
    marks = StoringMarks(lambda: notes.append(clock[0]), every_s=1.0, clock=lambda: clock[0])
    for t in (100.0, 100.4, 100.99, 101.0, 101.5, 103.2):
        clock[0] = t
        marks("a file")
    assert notes == [100.0, 101.0, 103.2] and marks.marks == 3

    def down() -> None:
        raise ConnectionError("database unreachable")

    failing = StoringMarks(down, every_s=1.0, clock=lambda: clock[0])
    failing("a file")  # never raises into the upload
    assert failing.marks == 0 and "database unreachable" in caplog.text


# ------------------------------------------------------------------------------ the store


def test_note_storing_stamps_a_live_run_on_the_server_clock_and_leaves_a_settled_one(store, experiment_id):
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert store.note_storing(run.id) is False and store.get_run(run.id).storing_at is None  # queued: not live
    store.transition(run.id, states.STARTING)
    store.transition(run.id, states.RUNNING)
    before = store.server_now()
    assert store.note_storing(run.id) is True
    stamped = store.get_run(run.id).storing_at
    assert stamped is not None and before <= stamped <= store.server_now()
    store.transition(run.id, states.SUCCEEDED)
    assert store.note_storing(run.id) is False and store.get_run(run.id).storing_at == stamped


def test_the_enforcer_counts_the_grace_from_the_last_stored_file(store, experiment_id):
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    store.transition(run.id, states.STARTING)
    store.transition(run.id, states.RUNNING)
    asked = store.request_stop(run.id).stop_requested_at
    with write_session(store.engine) as s:  # the job stored a file 25 s after the stop was asked for
        s.execute(update(RunRow).where(RunRow.id == run.id).values(storing_at=asked + timedelta(seconds=25)))
    enforcer = StopEnforcer()
    assert enforcer.enforce(store, None, grace_s=30, now=asked + timedelta(seconds=40)) == []  # 15 s since the file
    assert store.get_run(run.id).status == states.STOPPING
    assert enforcer.enforce(store, None, grace_s=30, now=asked + timedelta(seconds=56)) == [run.id]
    settled = store.get_run(run.id)
    assert settled.status == states.STOPPED
    assert settled.error == ("stored no file of its artifacts for the 30 s grace period while stopping; "
                             "its job was terminated")


# ------------------------------------------------------------------------------ a job storing as it stops


class StopAtTheEnd(FakeTraining):
    """Three steps with a checkpoint each, then a stop asked for, and the trainer's answer ``stopped``."""

    def __init__(self, store, run_id: int) -> None:
        super().__init__(range(1, 4))
        self.store, self.run_id = store, run_id
        self.stopped_at: float | None = None

    def __call__(self, config, *, output_dir, sink, resume_from):
        result = super().__call__(config, output_dir=output_dir, sink=sink, resume_from=resume_from)
        self.store.request_stop(self.run_id)
        self.stopped_at = time.monotonic()
        result.status = "stopped"
        return result


class Enforcer(threading.Thread):
    """A worker's stop enforcer, looking every 50 ms until told to end."""

    def __init__(self, store, grace_s: float) -> None:
        super().__init__(daemon=True)
        self.store, self.grace_s = store, grace_s
        self.settled: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        enforcer = StopEnforcer()
        while not self.done.is_set():
            self.settled += enforcer.enforce(self.store, None, grace_s=self.grace_s)
            time.sleep(0.05)


def _slow_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, delays: dict[str, float], default_s: float) -> Settings:
    """The shared-folder store at ``tmp_path/shared``, each file written after ``default_s`` seconds (or
    ``delays[name]`` for a file of that name)."""
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"file://{tmp_path / 'shared'}")
    put_file = FolderBackend.put_file

    def slow_put_file(self, local: Path, key: str):
        time.sleep(delays.get(Path(local).name, default_s))
        return put_file(self, local, key)

    monkeypatch.setattr(FolderBackend, "put_file", slow_put_file)
    return Settings()


@pytest.mark.integration
def test_a_stop_during_the_final_uploads_waits_for_them_while_they_progress(jobs_env, store, experiment_id,
                                                                           monkeypatch, tmp_path):
    # about 11 files after the stop, each stored in 0.35 s: about 4 s in all, longer than the 2.5 s grace,
    # while the marks (one a second at most) keep the last stored file under 1.4 s old
    settings = _slow_store(monkeypatch, tmp_path, {}, default_s=0.35)
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    training = StopAtTheEnd(store, run.id)
    enforcer = Enforcer(store, grace_s=2.5)
    enforcer.start()
    try:
        status = execute_run(run.id, settings=settings, store=store, train_fn=training)
        stored_for = time.monotonic() - training.stopped_at
    finally:
        enforcer.done.set()
        enforcer.join()
    done = store.get_run(run.id)
    print(f"\nthe job stored its checkpoints and exports for {stored_for:.1f} s after the stop (grace 2.5 s)")
    assert stored_for > 2.5  # longer than the grace period: without the marks the enforcer cuts it off
    assert enforcer.settled == [] and status == states.STOPPED
    assert done.status == states.STOPPED and done.error is None, done.error
    assert [(c.step, c.artifact_url is not None) for c in store.list_checkpoints(run.id)] == [
        (1, True), (2, True), (3, True)]
    assert done.storing_at is not None and done.storing_at > done.stop_requested_at


@pytest.mark.integration
def test_an_upload_that_stalls_after_the_stop_is_terminated_after_the_grace_period(jobs_env, store, experiment_id,
                                                                                   monkeypatch, tmp_path):
    # the final model's one file hangs for 4 s; every other file is written in 0.1 s
    settings = _slow_store(monkeypatch, tmp_path, {"model.safetensors": 4.0}, default_s=0.1)
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    enforcer = Enforcer(store, grace_s=1.5)
    enforcer.start()
    try:
        execute_run(run.id, settings=settings, store=store, train_fn=StopAtTheEnd(store, run.id))
    finally:
        enforcer.done.set()
        enforcer.join()
    done = store.get_run(run.id)
    quiet = (done.finished_at - done.storing_at).total_seconds()
    print(f"\nterminated {quiet:.2f} s after the job's last stored file (grace 1.5 s)")
    assert enforcer.settled == [run.id] and 1.5 <= quiet < 4.0
    assert done.status == states.STOPPED
    assert done.error == ("stored no file of its artifacts for the 1.5 s grace period while stopping; "
                          "its job was terminated")
