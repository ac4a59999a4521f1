"""A ``parallel_training: fsdp`` run executed by a real ``cooplab worker``: its job launches two gloo ranks
under torchrun (:mod:`jobs.fsdp_job`), rank 0 writes the steps to the real SQLite store, and the run ends
truthfully: ``stopped`` (with a sharded checkpoint) when a stop is asked mid-run, and a new attempt
resumes from it; ``failed`` naming the rank when one freezes (SIGSTOP) for the collective timeout; a job
process killed takes its ranks with it (``lost``). One worker runs the runs one after the other.

Each launch pays for two ranks importing torch and building the team, so every launch ends in a way no
other test's launch does: a run that succeeds, with its metrics, transcripts and checkpoints, is
tests/jobs/test_jobs_fsdp_store.py's (the same job, executed in the test's process), and a rank killed
(SIGKILL) ending the launch with the rank and its exit code named is
tests/engine/distributed/test_fsdp_launch.py's (the same :func:`jobs.torchrun.launch`); here the run of
a frozen rank shows how a launch's failure becomes the run's error."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from db import states
from jobs.client import resume_run, stop_run, submit_run
from tests.jobs.helpers import (
    WorkerProcess,
    tiny_config,
    wait_for,
    wait_until_final,
    wait_until_step,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COLLECTIVE_TIMEOUT_S = 20  # a frozen rank fails the others' collective after this long


def fsdp_config(max_steps: int) -> dict:
    """The job tests' tiny team on two ranks: one turn, every step one optimizer step per agent."""
    config = tiny_config(max_steps=max_steps, max_new_tokens=4, rollout_buffer_size=4, train_batch_size=4,
                         num_turns=1, logging_steps=1, parallel_training="fsdp", fsdp_ranks=2)
    config["agents"] = [{"name": "first", "model": "builtin:tiny-llama"},
                        {"name": "second", "model": "builtin:tiny-qwen2"}]
    return config


def ranks_of_job(worker: WorkerProcess) -> dict[int, psutil.Process]:
    """``{rank: process}`` of the ranks under the worker's job process (torchrun's children)."""
    out = {}
    for job in worker.job_pids():
        for proc in psutil.Process(job).children(recursive=True):
            try:
                if "cooplab.fsdp_rank" in proc.cmdline():
                    out[int(proc.environ()["RANK"])] = proc
            except (psutil.Error, KeyError):
                continue
    return out


def test_an_fsdp_run_through_a_worker_stops_resumes_fails_naming_a_frozen_rank_and_dies_with_its_job(
        jobs_env, store, experiment_id, start_worker):
    worker = start_worker(env_changes={"COOPLAB_COLLECTIVE_TIMEOUT_S": str(COLLECTIVE_TIMEOUT_S)})

    # 1. a stop mid-run reaches both ranks: a checkpoint at the step boundary, then stopped
    stopped = submit_run(fsdp_config(500), experiment_id=experiment_id, settings=jobs_env)
    wait_until_step(store, stopped, 1)
    ranks = ranks_of_job(worker)
    assert sorted(ranks) == [0, 1]
    assert list(store.series(stopped, "perf/ranks").ys)[:1] == [2.0]  # rank 0 reports the whole step
    t0 = time.monotonic()
    stop_run(stopped, settings=jobs_env)
    wait_until_final(store, stopped, 60, worker)
    run = store.get_run(stopped)
    print(f"\nfsdp stop latency: {time.monotonic() - t0:.1f} s")
    assert run.status == states.STOPPED and run.error is None, run.error
    checkpoint = store.latest_checkpoint(stopped)
    assert checkpoint is not None and checkpoint.step == run.step
    for proc in ranks.values():  # every rank ended (not killed: the stop reached them)
        wait_for(lambda p=proc: not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, 10, "the ranks to end")
    log_text = Path(run.log_path).read_text(encoding="utf-8")
    assert "[rank 1] " in log_text and "[rank 0] stopped: step" in log_text

    # 2. resume: a new attempt's ranks load the sharded checkpoint and go on after its step; then rank 1
    #    is frozen (SIGSTOP) mid-run: its pulse stops; after the collective timeout the job names it,
    #    kills every rank and the run fails (not lost, not hung)
    frozen = resume_run(stopped, settings=jobs_env)
    wait_until_step(store, frozen, checkpoint.step + 1)
    assert store.series(frozen, "train/reward_mean").xs[0] == checkpoint.step + 1
    ranks = ranks_of_job(worker)
    t0 = time.monotonic()
    os.kill(ranks[1].pid, signal.SIGSTOP)
    wait_until_final(store, frozen, COLLECTIVE_TIMEOUT_S + 60, worker)
    latency = time.monotonic() - t0
    print(f"fsdp frozen rank: failed after {latency:.1f} s (collective timeout {COLLECTIVE_TIMEOUT_S} s)")
    run = store.get_run(frozen)
    assert run.status == states.FAILED
    first = run.error.splitlines()[0]
    assert first.startswith("RanksFailed: rank 1 failed: stopped making progress: rank 1 froze (its process "
                            "stopped running"), first
    assert COLLECTIVE_TIMEOUT_S - 2 < latency < COLLECTIVE_TIMEOUT_S + 30  # its last pulse came up to 1 s before
    for proc in ranks.values():
        wait_for(lambda p=proc: not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, 10, "the ranks to end")
    assert worker.proc.poll() is None

    # 3. the job process killed (as the stop enforcer does after the grace period): torchrun and both
    #    ranks die with it (parent-death signals), and the run is settled like any dead job
    orphaned = submit_run(fsdp_config(500), experiment_id=experiment_id, settings=jobs_env)
    wait_until_step(store, orphaned, 0)  # running: every rank built the team (a step is not needed)
    ranks = ranks_of_job(worker)
    assert sorted(ranks) == [0, 1]
    (job_pid,) = worker.job_pids()
    t0 = time.monotonic()
    os.kill(job_pid, signal.SIGKILL)
    for proc in ranks.values():
        wait_for(lambda p=proc: not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, 10, "the ranks to die")
    print(f"fsdp job killed: both ranks gone {time.monotonic() - t0:.1f} s later")
    wait_until_final(store, orphaned, jobs_env.heartbeat_timeout_s + 30, worker)
    assert store.get_run(orphaned).status == states.LOST
