"""The warm-shutdown flag and what a job does with it (:mod:`jobs.warm_shutdown`); the real workers
under SIGTERM are in ``test_jobs_warm_shutdown.py``."""

from __future__ import annotations

import os
import time

import pytest
from celery.exceptions import Reject

from db import states
from jobs import warm_shutdown
from jobs.executor import execute_run
from tests.jobs.helpers import tiny_config


@pytest.fixture(autouse=True)
def _clear_flag():
    warm_shutdown.reset()
    yield
    warm_shutdown.reset()


def test_a_job_process_forked_before_the_shutdown_sees_the_flag_set_after_it():
    pid = os.fork()
    if pid == 0:  # the job process: forked first, then waits for the parent's flag
        deadline = time.monotonic() + 10
        while not warm_shutdown.requested() and time.monotonic() < deadline:
            time.sleep(0.01)
        os._exit(0 if warm_shutdown.requested() else 1)
    assert not warm_shutdown.requested()
    time.sleep(0.05)
    warm_shutdown.mark()  # in the worker parent's signal handler
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_unclaimed_run_goes_back_to_the_queue_when_the_worker_is_leaving():
    warm_shutdown.leave_if_requested("run 7")  # not leaving: nothing happens
    warm_shutdown.mark()
    with pytest.raises(Reject) as raised:
        warm_shutdown.leave_if_requested("run 7")
    assert raised.value.requeue is True


def test_a_run_claimed_as_the_shutdown_began_stops_before_it_trains(jobs_env, store, experiment_id):
    def train(*args, **kwargs):
        raise AssertionError("the run must not train")

    run = store.create_run(experiment_id, tiny_config(), "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store, train_fn=train, leaving=lambda: True) == states.STOPPED
    ended = store.get_run(run.id)
    assert ended.status == states.STOPPED and ended.step == 0


def test_a_run_claimed_while_the_worker_stays_trains(jobs_env, store, experiment_id):
    trained = []

    def train(config, *, output_dir, sink, resume_from):
        trained.append(True)
        sink.start(1, {})
        sink.log_step(1, 4, {"train/reward_mean": 0.5}, [])
        return type("Result", (), {"status": "completed", "step": 1})()

    run = store.create_run(experiment_id, tiny_config(max_steps=1), "cpu")
    assert execute_run(run.id, settings=jobs_env, store=store, train_fn=train, leaving=lambda: False) == \
        states.SUCCEEDED
    assert trained == [True]
