"""The retry policy's decisions (:mod:`jobs.retries`): which lost runs get another attempt, its note, and
the queuing by whichever process settles the run (a real SQLite file and the filesystem broker)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from db import states
from db.records import Run
from engine.schema.errors import ConfigError
from engine.schema.run_config import dump_run_config, parse_run_config
from jobs.executor import execute_run
from jobs.liveness import look
from jobs.maintenance import run_maintenance
from jobs.retries import lost_cause, max_attempts, retry_lost_runs, retry_note, why_not_retried
from tests.jobs.helpers import tiny_config

HEARTBEAT = "no heartbeat for more than 60 s: the worker died or hung"


def _run(**fields: object) -> Run:
    now = datetime.now(UTC)
    base = dict(id=17, experiment_id=1, attempt=1, status=states.LOST, config={"retry": {"max_attempts": 3}},
                queue="cpu", device="cpu", celery_task_id=None, worker=None, created_at=now, started_at=now,
                finished_at=now, heartbeat_at=now, step=41, env_step=0, total_steps=100, error=HEARTBEAT,
                resumed_from=None, stop_requested=False, stop_requested_at=None, tags=(), notes="", log_path=None,
                output_dir=None)
    return Run(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(("config", "expected"), [
    ({}, 1), ({"retry": None}, 1), ({"retry": {"max_attempts": 3}}, 3), ({"retry": {"max_attempts": True}}, 1),
    ({"retry": {"max_attempts": "3"}}, 1), ({"retry": {}}, 1),
])
def test_max_attempts_of_a_stored_config(config: dict, expected: int) -> None:
    assert max_attempts(config) == expected


def test_only_a_lost_run_with_attempts_left_is_retried() -> None:
    assert why_not_retried(_run()) is None
    assert why_not_retried(_run(attempt=2)) is None
    assert why_not_retried(_run(attempt=3)) == "it was attempt 3 of 3: no attempt left"
    for status in (states.FAILED, states.STOPPED, states.CANCELLED, states.SUCCEEDED, states.RUNNING):
        assert why_not_retried(_run(status=status)) == f"it is {status}: only lost runs are retried"
    assert why_not_retried(_run(config={})) == "its config has no retry policy (retry.max_attempts is 1)"
    assert why_not_retried(_run(retried_as=18)) == "it was retried already (run 18)"
    assert why_not_retried(_run(stop_requested=True)) == "someone asked it to stop"
    oom = "out of memory (the kernel's OOM killer ended the job; cgroup /x memory.oom_control oom_kill 1, 0 when ...)"
    assert why_not_retried(_run(error=oom)) == "it ran out of memory: it would again"
    assert why_not_retried(_run(), study_child=True).startswith("it is a study's child")


def test_the_note_says_which_attempt_from_where_and_why() -> None:
    assert retry_note(_run(), 40) == ("attempt 2 of 3: resumed from the checkpoint at step 40 after run 17 was lost "
                                      "at step 41 (no heartbeat for more than 60 s)")
    dead = "its job process (pid 9 on vm) is gone: it died without ending the run (killed, out of memory, ...)"
    assert retry_note(_run(attempt=2, step=3, error=dead), None) == (
        "attempt 3 of 3: started over from step 0: no checkpoint was saved after run 17 was lost at step 3 "
        "(its job process (pid 9 on vm) is gone)")
    assert lost_cause(None) == lost_cause("") == "its job is gone"
    assert len(lost_cause("x" * 500)) == 200


def test_the_run_config_declares_the_policy() -> None:
    config = parse_run_config({**tiny_config(), "retry": {"max_attempts": 3}})
    assert config.retry is not None and config.retry.max_attempts == 3
    assert "retry" not in dump_run_config(parse_run_config(tiny_config()))  # no policy: written as before
    with pytest.raises(ConfigError, match=r"retry\.max_attempts: Input should be greater than or equal to 1"):
        parse_run_config({**tiny_config(), "retry": {"max_attempts": 0}})
    with pytest.raises(ConfigError, match=r"retry\.attempts: unknown field"):
        parse_run_config({**tiny_config(), "retry": {"attempts": 2}})


def _lose(store, run_id: int, step: int) -> None:
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    store.log_step(run_id, step, step, {"train/reward_mean": 0.5})
    store.heartbeat(run_id)


def _broker_messages(settings) -> list[Path]:
    return sorted(Path(settings.data_dir).rglob("*.msg"))


def test_whoever_settles_a_lost_run_queues_one_attempt_from_its_checkpoint(jobs_env, store, experiment_id):
    """``look`` (``cooplab runs``, the dashboard) settles a run whose heartbeat expired and queues its next
    attempt, sent to the broker; a maintenance pass afterwards, and that attempt lost in turn at its last
    attempt, queue nothing more."""
    config = {**tiny_config(max_steps=50), "retry": {"max_attempts": 2}}
    first = store.create_run(experiment_id, config, "cpu", total_steps=50)
    _lose(store, first.id, 41)
    store.add_checkpoint(first.id, 40, "/data/runs/1/checkpoints/checkpoint-40")
    sent_before = len(_broker_messages(jobs_env))
    later = jobs_env.model_copy(update={"heartbeat_timeout_s": 0.001})  # its heartbeat is older than that now
    assert look(store, later) == [first.id]
    lost = store.get_run(first.id)
    assert lost.status == states.LOST and lost.retried_as is not None
    second = store.get_run(lost.retried_as)
    assert (second.status, second.attempt, second.resumed_from) == (states.QUEUED, 2, first.id)
    assert second.notes == ("attempt 2 of 2: resumed from the checkpoint at step 40 after run 1 was lost at step 41 "
                            f"(no heartbeat for more than {later.heartbeat_timeout_s:g} s)")
    assert len(_broker_messages(jobs_env)) == sent_before + 1 and second.celery_task_id
    assert run_maintenance(jobs_env, store=store, reconcile=False).retried == ()

    _lose(store, second.id, 45)
    store.transition(second.id, states.LOST, error=HEARTBEAT)
    assert retry_lost_runs(store, jobs_env) == []  # attempt 2 of 2: none left
    assert [r.id for r in store.list_runs()] == [second.id, first.id]


def test_a_maintenance_pass_retries_a_run_another_process_settled(jobs_env, store, experiment_id):
    """A run settled by a process that did not retry it (it died first, or settled it from a worker's job
    watch) is retried by the next maintenance pass; one lost before any checkpoint starts over."""
    config = {**tiny_config(max_steps=2), "retry": {"max_attempts": 3}}
    first = store.create_run(experiment_id, config, "cpu", total_steps=2)
    _lose(store, first.id, 1)
    store.transition(first.id, states.LOST, error="its job process (pid 9 on vm) is gone: it died")
    report = run_maintenance(jobs_env, store=store, reconcile=False)
    (retry,) = report.retried
    assert store.get_run(retry).notes == ("attempt 2 of 3: started over from step 0: no checkpoint was saved after "
                                          "run 1 was lost at step 1 (its job process (pid 9 on vm) is gone)")

    seen: list[object] = []

    def train(config, *, output_dir, sink, resume_from):  # the executor's training step, recorded
        seen.append(resume_from)
        sink.start(2, {})
        return type("Result", (), {"status": "completed", "step": 2})()

    assert execute_run(retry, settings=jobs_env, store=store, train_fn=train) == states.SUCCEEDED
    assert seen == [None]  # started over, instead of failing for want of a checkpoint
