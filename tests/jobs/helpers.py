"""Helpers for the job tests: environments, the tiny run config, waiting, and worker subprocesses."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from db import states
from jobs.client import stop_run

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120  # a job process imports torch and transformers and builds two tiny models

def _redis_db() -> int:
    """The job tests' own Redis database number (only this one is flushed): 12, or 12 + n for the
    pytest-xdist worker ``gw<n>`` so parallel test processes never flush each other's queues."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return 12 + int(worker.removeprefix("gw") or 0)


REDIS_DB = _redis_db()


def jobs_environment(home: Path, *, broker_url: str | None = None, heartbeat_timeout_s: float = 5.0,
                     stop_grace_s: float = 30.0) -> dict[str, str]:
    """``COOPLAB_*`` variables for one test data directory."""
    env = {
        "COOPLAB_HOME": str(home),
        "COOPLAB_HEARTBEAT_TIMEOUT_S": str(heartbeat_timeout_s),
        "COOPLAB_STOP_GRACE_S": str(stop_grace_s),
        "COOPLAB_LOG_LEVEL": "INFO",
    }
    if broker_url:
        env["COOPLAB_BROKER_URL"] = broker_url
    return env


def redis_test_url() -> str | None:
    """The Redis server for tests (``COOPLAB_TEST_REDIS_URL``), pointed at this suite's own database."""
    base = os.environ.get("COOPLAB_TEST_REDIS_URL")
    if not base:
        return None
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{REDIS_DB}", "", ""))


def flush_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def tiny_config(max_steps: int = 3, **trainer: object) -> dict:
    """The quickstart task on two tiny agents: a few fast CPU steps with transcripts and checkpoints."""
    return {
        "name": "jobs-test",
        "agents": [{"name": "first"}, {"name": "second"}],
        "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 0}},
        "trainer": {"max_steps": max_steps, "num_generations": 2, "max_new_tokens": 8, "eval_interval": 0,
                    "checkpoint_interval": 1, "transcripts_per_step": 1, **trainer},
    }


# ------------------------------------------------------------------------------- worker processes


@dataclass
class WorkerProcess:
    """A ``cooplab worker`` subprocess in its own process group."""

    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def job_pids(self) -> list[int]:
        """Pids of the worker's prefork children (the job processes)."""
        import psutil

        try:
            return [c.pid for c in psutil.Process(self.pid).children()]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """Kill the worker and its job processes at once (the whole process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> object:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def wait_until_step(store, run_id: int, step: int) -> None:
    def reached():
        run = store.get_run(run_id)
        assert run.is_active, f"run {run_id} ended early as {run.status}: {run.error}"
        return run.status == states.RUNNING and run.step >= step

    wait_for(reached, START_TIMEOUT_S, f"run {run_id} to reach step {step}")


def wait_until_final(store, run_id: int, timeout: float, worker: WorkerProcess | None = None) -> float:
    """Wait for a final state; returns the seconds it took. On a time-out the failure says the run's
    state and, given its ``worker``, ends with that worker's log."""
    t0 = time.monotonic()
    try:
        wait_for(lambda: not store.get_run(run_id).is_active, timeout, f"run {run_id} to end")
    except AssertionError as exc:
        run = store.get_run(run_id)
        detail = f"{exc}; it is {run.status} at step {run.step} on worker {run.worker!r}"
        if worker is not None:
            detail += f"\n--- the worker's log, last 8000 characters ---\n{worker.log()[-8000:]}"
        raise AssertionError(detail) from None
    return time.monotonic() - t0


def assert_forced_stop(settings, store, worker, run_id: int, grace_s: float) -> None:
    """With the run stuck in a long step: the heartbeat keeps it alive, and a stop ends it after the
    grace period by killing its job process (revoke over the broker); the worker lives on."""
    (job_pid,) = worker.job_pids()
    time.sleep(settings.heartbeat_timeout_s + 1.5)
    assert store.get_run(run_id).status == states.RUNNING

    t0 = time.monotonic()
    stop_run(run_id, settings=settings)
    wait_until_final(store, run_id, grace_s + 30)
    latency = time.monotonic() - t0
    print(f"\nstop latency (terminated after a {grace_s:g} s grace period, {settings.resolved_broker_url.split(':')[0]}"
          f" broker): {latency:.2f} s")
    run = store.get_run(run_id)
    assert run.status == states.STOPPED and "grace period" in run.error
    assert latency >= grace_s - 0.5
    task_id = run.celery_task_id
    wait_for(lambda: f"Terminating {task_id}" in worker.log(), 20, "the worker to act on the revoke")
    wait_for(lambda: not psutil.pid_exists(job_pid) or psutil.Process(job_pid).status() == psutil.STATUS_ZOMBIE,
             20, "the job process to be terminated")
    assert worker.proc.poll() is None


def qwen2_1_5b_folder(tmp_path: Path) -> Path:
    """A model folder holding only Qwen2.5-1.5B's config (1,543,714,304 parameters), for the memory checks."""
    import json

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "qwen2", "vocab_size": 151_936, "hidden_size": 1536, "intermediate_size": 8960,
        "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "tie_word_embeddings": True,
        "max_position_embeddings": 32768}))
    return folder
