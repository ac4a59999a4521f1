"""The executor in this process (the worker tests run it inside real Celery workers)."""

from __future__ import annotations

import pytest

from db import states
from jobs.executor import execute_run, local_device, run_log_path
from tests.jobs.helpers import tiny_config


@pytest.mark.parametrize("status", [states.SUCCEEDED, states.STOPPED, states.LOST, states.CANCELLED,
                                    states.RUNNING])
def test_a_run_that_is_not_queued_is_never_run_again(jobs_env, store, experiment_id, status):
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    path = {
        states.SUCCEEDED: [states.STARTING, states.RUNNING, states.SUCCEEDED],
        states.STOPPED: [states.STARTING, states.STOPPED],
        states.LOST: [states.STARTING, states.LOST],
        states.CANCELLED: [states.CANCELLED],
        states.RUNNING: [states.STARTING, states.RUNNING],
    }[status]
    for to in path:
        store.transition(run.id, to)
    before = store.get_run(run.id)
    assert execute_run(run.id, settings=jobs_env, store=store) == status
    after = store.get_run(run.id)
    assert after == before  # not touched: same state, no heartbeat, no log file
    assert not run_log_path(jobs_env, run.id).exists()


def test_a_missing_run_is_reported_not_raised(jobs_env, store):
    assert execute_run(12345, settings=jobs_env, store=store) == "missing"


def test_an_invalid_stored_config_fails_the_run_with_a_readable_error(jobs_env, store, experiment_id):
    bad = tiny_config()
    bad["trainer"]["temperature"] = -1
    bad["agents"][0]["colour"] = "blue"
    run = store.create_run(experiment_id, bad, "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store, worker=None) == states.FAILED
    failed = store.get_run(run.id)
    assert failed.status == states.FAILED
    assert failed.error.startswith("invalid run config:")
    assert "trainer.temperature" in failed.error and "agents.0.colour" in failed.error
    assert "Traceback" not in failed.error
    assert "invalid run config" in run_log_path(jobs_env, run.id).read_text()
    assert failed.log_path == str(run_log_path(jobs_env, run.id))


def test_the_queue_decides_the_device_inside_the_job():
    assert local_device("cpu") == "cpu"
    assert local_device("cuda:3") == "cuda:0"  # the worker pins GPU 3 with CUDA_VISIBLE_DEVICES=3


def test_a_resumed_run_whose_checkpoint_is_missing_fails_with_the_reason(jobs_env, store, experiment_id, tmp_path):
    old = store.create_run(experiment_id, tiny_config(), "cpu")
    for to in (states.STARTING, states.RUNNING, states.FAILED):
        store.transition(old.id, to)
    store.add_checkpoint(old.id, 3, str(tmp_path / "gone" / "checkpoint-3"))
    new = store.create_run(experiment_id, tiny_config(), "cpu", resumed_from=old.id)
    assert execute_run(new.id, settings=jobs_env, store=store) == states.FAILED
    error = store.get_run(new.id).error
    assert error.startswith("FileNotFoundError:") and "checkpoint-3" in error and "not on this machine" in error


def test_the_run_log_has_a_line_per_step_and_the_console_does_not(jobs_env, store, experiment_id):
    """The dashboard's Logs tab reads the run's log file: it gets one line per step, evaluation and
    checkpoint; those lines do not reach the worker's console (the root logger)."""
    import logging

    def train(config, *, output_dir, sink, resume_from):
        sink.start(3, {})
        for step in (1, 2, 3):
            sink.log_step(step, step * 4, {"train/reward_mean": 0.1 * step, "agent/first/loss": 1.0 / step,
                                           "perf/step_time_s": 0.5}, [])
        sink.log_metrics(3, 12, {"eval/reward_mean": 0.25})
        sink.log_checkpoint(3, f"{output_dir}/checkpoint-3")
        return type("Result", (), {"status": "completed", "step": 3})()

    class Console(logging.Handler):  # what the worker's console handler (on the root logger) would get
        def __init__(self) -> None:
            super().__init__(logging.INFO)
            self.names: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.names.append(record.name)

    console = Console()
    logging.getLogger().addHandler(console)
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    try:
        assert execute_run(run.id, settings=jobs_env, store=store, train_fn=train) == states.SUCCEEDED
    finally:
        logging.getLogger().removeHandler(console)
    text = run_log_path(jobs_env, run.id).read_text()
    assert "training starts (3 steps)" in text
    assert "step 2/3 · team reward 0.200 · loss first 0.500 · 0.50 s/step" in text
    assert "metrics at step 3: eval/reward_mean 0.250" in text and "checkpoint at step 3" in text
    assert "jobs.executor" in console.names and "cooplab.progress" not in console.names


def test_a_pruned_checkpoint_loses_its_row_when_the_trainer_reports_it(jobs_env, store, experiment_id):
    """The trainer reports each checkpoint folder it prunes (``checkpoint_total_limit``) through the sink;
    the job deletes that row at once, not at some later step."""
    from pathlib import Path

    seen: list[list[int]] = []

    def train(config, *, output_dir, sink, resume_from):
        sink.start(2, {})
        for step in (1, 2):
            folder = Path(output_dir) / "checkpoints" / f"checkpoint-{step}"
            folder.mkdir(parents=True)
            sink.log_step(step, step, {}, [])
            sink.log_checkpoint(step, str(folder))
        first = Path(output_dir) / "checkpoints" / "checkpoint-1"
        first.rmdir()
        sink.log_checkpoint_pruned(1, str(first))
        seen.append([c.step for c in store.list_checkpoints(run.id)])
        return type("Result", (), {"status": "completed", "step": 2})()

    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store, train_fn=train) == states.SUCCEEDED
    assert seen == [[2]]
    assert [c.step for c in store.list_checkpoints(run.id)] == [2]
    assert "checkpoint at step 1 removed (checkpoint_total_limit)" in run_log_path(jobs_env, run.id).read_text()


def test_a_failure_before_training_ends_the_run_failed_with_its_reason(jobs_env, store, experiment_id):
    """The job boundary covers the steps before training too: here the run's log file cannot be created."""
    jobs_env.logs_dir.rmdir()
    jobs_env.logs_dir.write_text("not a folder")
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store, worker="nobody-registered") == states.FAILED
    failed = store.get_run(run.id)
    assert failed.error.splitlines()[0].startswith(("FileExistsError", "NotADirectoryError"))
    assert str(jobs_env.logs_dir) in failed.error


def test_the_job_tells_the_engine_whether_to_keep_freed_memory(jobs_env, store, experiment_id, monkeypatch):
    """``COOPLAB_KEEP_FREED_MEMORY=0`` is read by the job's settings and handed to the engine, which
    reads no environment variables: the CPU team trains with malloc's own policy."""
    import platform

    from engine.trainer import host_memory
    from jobs.settings import Settings

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's; this C library has none")
    monkeypatch.setenv("COOPLAB_KEEP_FREED_MEMORY", "0")
    settings = Settings()
    assert settings.keep_freed_memory is False
    run = store.create_run(experiment_id, tiny_config(max_steps=1), "cpu")
    try:
        assert execute_run(run.id, settings=settings, store=store) == states.SUCCEEDED
        assert not host_memory.is_kept()
    finally:
        host_memory.set_policy(keep=True)  # the process-wide default again, for the tests after this one
