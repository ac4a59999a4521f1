"""Real workers, real runs: ``cooplab worker`` subprocesses with the embedded filesystem broker, a real
SQLite file and the real engine training the quickstart task on tiny models.

Every job process pays for importing torch and building its models, so the life of a run is tested
as one story (stop, resume, kill, restart, the queue) rather than one run per property. The fixture
kills every worker (and its job processes) whatever happens. Measured latencies are printed (run with
``-s`` to see them).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from db import states
from jobs.client import enqueue_run, resume_run, stop_run, submit_run
from jobs.settings import Settings
from tests.jobs.helpers import (
    START_TIMEOUT_S,
    assert_forced_stop,
    tiny_config,
    wait_for,
    wait_until_final,
    wait_until_step,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_stop_resume_kill_and_the_queue_through_the_life_of_runs(jobs_env, store, experiment_id, start_worker):
    worker = start_worker()
    # the parent loaded torch before forking (COOPLAB_WORKER_PRELOAD), so its job processes start with it
    assert "libtorch_cpu" in Path(f"/proc/{worker.pid}/maps").read_text()

    # 1. submit: the run trains, metrics and transcripts arrive, the worker reports it
    first = submit_run(tiny_config(max_steps=500), experiment_id=experiment_id, settings=jobs_env)
    wait_until_step(store, first, 2)
    assert "train/reward_mean" in store.metric_keys(first)
    assert store.episodes(first, split="train"), "no transcripts stored"
    env = store.run_environment(first)  # recorded by the forked job process as it started
    assert env["pid"] != worker.pid and env["device"] == "cpu" and env["git"]["commit"]
    (registered,) = store.list_workers(online_only=True)
    assert registered.queues == ("cpu",) and registered.pid == worker.pid
    wait_for(lambda: store.list_workers()[0].current_run_id == first, 15, "the worker to report its run")

    # 2. stop: a checkpoint at the step boundary, then "stopped"
    t0 = time.monotonic()
    assert stop_run(first, settings=jobs_env) == states.STOPPING
    wait_until_final(store, first, 60)
    print(f"\nstop latency (graceful, filesystem broker): {time.monotonic() - t0:.2f} s")
    stopped = store.get_run(first)
    assert stopped.status == states.STOPPED and stopped.error is None
    checkpoint = store.latest_checkpoint(first)
    assert checkpoint is not None and checkpoint.step == stopped.step
    assert Path(checkpoint.path).exists()
    assert Path(stopped.log_path).read_text().count(f"run {first}") >= 2

    # 3. resume: a second attempt continues after the checkpoint; a run queued behind it waits
    second = resume_run(first, settings=jobs_env)
    waiting = submit_run(tiny_config(max_steps=2), experiment_id=experiment_id, settings=jobs_env)
    wait_until_step(store, second, checkpoint.step + 2)
    resumed = store.get_run(second)
    assert (resumed.attempt, resumed.resumed_from) == (2, first)
    steps = store.series(second, "train/reward_mean").xs
    assert steps[0] == checkpoint.step + 1, f"resumed at step {steps[0]}, checkpoint was {checkpoint.step}"
    assert store.get_run(waiting).status == states.QUEUED  # one run per device at a time

    # 4. kill -9 of the job process: the worker sees its job die (the job file's lock is gone) and the
    #    run is lost at once, well before its heartbeat would expire
    (job_pid,) = worker.job_pids()
    os.kill(job_pid, signal.SIGKILL)
    t0 = time.monotonic()
    wait_until_final(store, second, jobs_env.heartbeat_timeout_s + 30)
    latency = time.monotonic() - t0
    print(f"lost-detection latency (worker's signal; heartbeat timeout {jobs_env.heartbeat_timeout_s:g} s): "
          f"{latency:.2f} s")
    lost = store.get_run(second)
    assert lost.status == states.LOST and f"its job process (pid {job_pid} on" in lost.error, lost.error
    assert "died without ending the run" in lost.error
    assert latency < jobs_env.heartbeat_timeout_s - 1  # not the heartbeat: the worker's own signal

    # 5. a restarted worker runs the run that was waiting; the lost one is never run again
    worker.kill()
    start_worker()
    wait_until_final(store, waiting, START_TIMEOUT_S)
    done = store.get_run(waiting)
    assert done.status == states.SUCCEEDED, done.error
    assert done.step == 2 and done.started_at >= lost.finished_at
    assert store.get_run(second).status == states.LOST


def test_an_invalid_stored_config_fails_the_run_with_a_readable_error(jobs_env, store, experiment_id,
                                                                      start_worker):
    # the run fails on its config before it trains: a worker without the engine's preload (importing torch
    # and transformers, about 9 s of CPU) is ready sooner
    start_worker(env_changes={"COOPLAB_WORKER_PRELOAD": "false"})
    bad = tiny_config()
    bad["trainer"]["max_new_tokens"] = 0
    run_id = store.create_run(experiment_id, bad, "cpu").id  # stored without validation (an old schema)
    enqueue_run(run_id, settings=jobs_env)
    wait_until_final(store, run_id, 60)
    run = store.get_run(run_id)
    assert run.status == states.FAILED
    assert run.error.startswith("invalid run config:")
    assert "trainer.max_new_tokens" in run.error


def test_a_run_ignoring_its_stop_is_terminated_after_the_grace_period(jobs_env, store, experiment_id,
                                                                      start_worker, monkeypatch, allow_plugin_tasks):
    grace_s = 2.0
    monkeypatch.setenv("COOPLAB_STOP_GRACE_S", str(grace_s))
    # a 3 s heartbeat timeout (a beat every 0.75 s): the stuck step outlives it sooner (the jobs' default is 5 s)
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", "3")
    worker = start_worker()
    config = tiny_config(max_steps=5)
    config["task"] = {"name": f"{allow_plugin_tasks}:slow_quickstart", "params": {"sleep_s": 300}}
    run_id = submit_run(config, experiment_id=experiment_id, settings=Settings())
    wait_for(lambda: store.get_run(run_id).status == states.RUNNING, START_TIMEOUT_S, "the run to start")
    assert_forced_stop(Settings(), store, worker, run_id, grace_s)
