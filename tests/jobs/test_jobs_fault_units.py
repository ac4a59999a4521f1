"""The parts of fault handling that need no worker: reasons, job files, how a dead job's run ends,
broker message ids, worker names, the data directory's owner."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import socket
from collections import namedtuple
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from db import states
from jobs import jobfile
from jobs.datadir import DataDirOwnedError, claim_data_dir, redact_url
from jobs.faults import describe_failure, first_line, human_bytes, resource_reason
from jobs.liveness import dead_job_end, look, settle_local_dead_jobs
from jobs.maintenance import job_death_cause
from jobs.reconcile import _task_id
from jobs.worker import node_name, worker_name
from tests.jobs.helpers import tiny_config

Usage = namedtuple("Usage", "total used free")


def test_filesystem_faults_become_one_line_reasons(tmp_path, monkeypatch) -> None:
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.bin"))
    reason = resource_reason(full)
    assert reason.startswith(f"no space left on device writing {tmp_path / 'x.bin'} (") and " free of " in reason
    quota = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert resource_reason(quota, output_path=tmp_path).startswith(f"disk quota exceeded writing {tmp_path} (")
    denied = PermissionError(errno.EACCES, "Permission denied", "/etc/shadow")
    assert resource_reason(denied).startswith("permission denied writing /etc/shadow")
    try:  # the cause of a wrapping error counts
        try:
            raise full
        except OSError as inner:
            raise RuntimeError("could not save") from inner
    except RuntimeError as outer:
        assert resource_reason(outer) == reason
    sqlite_full = Exception("(sqlite3.OperationalError) database or disk is full")
    assert resource_reason(sqlite_full, database_url=f"sqlite:///{tmp_path}/c.db").startswith(
        f"no space left on device writing the database {tmp_path}/c.db (")
    torch_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 2841088 vs 2840976")
    assert resource_reason(torch_error) is None  # no path to name, no guess
    assert resource_reason(ValueError("bad value"), output_path=tmp_path) is None
    monkeypatch.setattr("jobs.faults.shutil.disk_usage", lambda path: Usage(100, 90, 10))  # nearly full
    assert resource_reason(torch_error, output_path=tmp_path).startswith(f"no space left on device writing {tmp_path}")


def test_a_failure_description_is_the_reason_then_the_traceback() -> None:
    try:
        raise OSError(errno.ENOSPC, "No space left on device", "/nowhere/file")
    except OSError as exc:
        text = describe_failure(exc)
    head, _, trace = text.partition("\n\n")
    assert head.startswith("no space left on device writing /nowhere/file") and "Traceback" in trace
    assert first_line("\n  could not   send:\n more") == "could not send:"
    assert [human_bytes(n) for n in (0, 512, 5 << 20, 3 << 30)] == ["0 B", "512 B", "5.0 MiB", "3.0 GiB"]


def _hold(data_dir: Path, run_id: int, ready, release) -> None:  # in a child process
    job = jobfile.JobFile.acquire(data_dir, run_id)
    ready.set()
    release.wait(30)
    job.release(remove=False)


def test_a_job_file_is_held_while_its_process_lives_and_free_once_it_dies(tmp_path) -> None:
    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()
    child = context.Process(target=_hold, args=(tmp_path, 7, ready, release))
    child.start()
    assert ready.wait(30)
    state = jobfile.probe(tmp_path, 7)
    assert state.held and state.pid == child.pid and state.host == socket.gethostname()
    assert jobfile.JobFile.acquire(tmp_path, 7, wait_s=0.2) is None  # another process executes run 7
    child.kill()
    child.join()
    state = jobfile.probe(tmp_path, 7)
    assert not state.held and state.status is None  # the kernel dropped the lock with the process
    assert jobfile.probe(tmp_path, 8) is None  # no file: no judgement


def test_last_words_fit_the_preallocated_file(tmp_path) -> None:
    job = jobfile.JobFile.acquire(tmp_path, 3)
    assert jobfile.job_file_path(tmp_path, 3).stat().st_size == jobfile.JOB_FILE_BYTES
    assert job.last_words(states.FAILED, "no space left on device writing /x " + "y" * 10_000)
    job.release(remove=not job.keep)
    assert jobfile.job_file_path(tmp_path, 3).stat().st_size == jobfile.JOB_FILE_BYTES
    state = jobfile.probe(tmp_path, 3)
    assert (state.held, state.status) == (False, states.FAILED)
    assert state.reason.startswith("no space left on device writing /x yyy") and state.reason.endswith("[...]")


def test_a_dead_jobs_run_ends_with_its_last_words_or_lost_or_stopped(store, experiment_id) -> None:
    run = store.create_run(experiment_id, {}, "cpu")
    gone = jobfile.JobState(held=False, host="h", pid=1, status=None, reason=None)
    assert dead_job_end(run, gone, "it died", grace_s=30) == (states.LOST, "it died")
    words = jobfile.JobState(held=False, host="h", pid=1, status=states.FAILED, reason="disk full")
    assert dead_job_end(run, words, "it died", grace_s=30) == (states.FAILED, "disk full")
    store.transition(run.id, states.STARTING)
    stopping = store.request_stop(run.id)
    to, error = dead_job_end(stopping, gone, "it died", grace_s=30)
    assert to == states.STOPPED and error == "its job process ended while stopping: it died"
    later = stopping.stop_requested_at + timedelta(seconds=31)
    assert dead_job_end(stopping, gone, "it died", grace_s=30, now=later) == (
        states.STOPPED, "did not stop within the 30 s grace period; its job was terminated")


def test_look_settles_a_run_whose_job_file_nobody_holds_and_leaves_the_others(jobs_env, store, experiment_id) -> None:
    dead, alive, elsewhere, unknown = (store.create_run(experiment_id, tiny_config(), "cpu").id for _ in range(4))
    for run_id in (dead, alive, elsewhere, unknown):
        store.transition(run_id, states.STARTING)
        store.transition(run_id, states.RUNNING)
    jobfile.JobFile.acquire(jobs_env.data_dir, dead).release(remove=False)  # its process is gone
    held = jobfile.JobFile.acquire(jobs_env.data_dir, alive)  # this process holds it: alive
    other = jobfile.job_file_path(jobs_env.data_dir, elsewhere)
    other.write_text(json.dumps({"run_id": elsewhere, "host": "another-host", "pid": 1}).ljust(4096))
    try:
        assert settle_local_dead_jobs(store, jobs_env) == [dead]
        assert look(store, jobs_env) == []  # heartbeats are fresh: nothing else is settled
    finally:
        held.release(remove=True)
    lost = store.get_run(dead)
    assert lost.status == states.LOST and lost.error.startswith(f"its job process (pid {os.getpid()} on ")
    assert not jobfile.job_file_path(jobs_env.data_dir, dead).exists()
    assert [store.get_run(i).status for i in (alive, elsewhere, unknown)] == [states.RUNNING] * 3


def test_job_death_causes_read_celerys_words() -> None:
    assert job_death_cause(Exception("Worker exited prematurely: signal 9 (SIGKILL) Job: 0.")).startswith(
        "its job process was killed by signal 9 (SIGKILL)")
    assert job_death_cause(Exception("Worker exited prematurely: exitcode 3 Job: 0.")) == (
        "its job process exited with code 3 before ending the run")


def test_broker_messages_give_their_task_ids() -> None:
    message = {"body": "e30=", "headers": {"id": "abc", "task": "jobs.run_training"}, "properties": {}}
    assert _task_id(json.dumps(message)) == "abc"
    assert _task_id(json.dumps([json.dumps(message), "cooplab", "cpu"]).encode()) == "abc"  # Redis 'unacked'
    assert _task_id(b"not json") is None and _task_id({}) is None


def test_worker_names_are_unique_per_process_or_given() -> None:
    assert node_name("cuda:1", host="box", pid=42) == "cooplab-cuda1-42@box"
    assert node_name("cpu").startswith(f"cooplab-cpu-{os.getpid()}@")
    assert worker_name("cpu", "gpu-a") == f"gpu-a@{socket.gethostname()}"
    assert worker_name("cpu", "gpu-a@rack3") == "gpu-a@rack3"
    with pytest.raises(ValueError, match="without spaces"):
        worker_name("cpu", "two words")


def test_the_data_directory_records_its_database_and_refuses_another(jobs_env, store, tmp_path) -> None:
    database_id = claim_data_dir(jobs_env, store)
    recorded = json.loads((jobs_env.data_dir / "database.json").read_text())
    assert recorded["database_id"] == database_id == store.database_id()
    assert claim_data_dir(jobs_env, store) == database_id  # again: fine
    from db.migrate import upgrade
    from db.store import Store

    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    upgrade(other_url)
    with Store(other_url) as other, pytest.raises(DataDirOwnedError, match="belongs to another database"):
        claim_data_dir(jobs_env, other)
    assert redact_url("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redact_url("redis://:secret@h:6379/0") == "redis://:***@h:6379/0"
    assert datetime.now(UTC) >= datetime.fromisoformat(recorded["claimed_at"])
