"""Fixtures for the job tests: a data directory per test, a store on a real SQLite file (a copy of the
suite's migrated template), and real Celery worker processes started as subprocesses (always killed, also
when a test fails)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from db.store import Store
from jobs.settings import Settings
from tests.jobs.helpers import ROOT, WorkerProcess, flush_redis, jobs_environment, redis_test_url, wait_for


@pytest.fixture
def jobs_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             migrated_sqlite: Callable[[Path], str]) -> Settings:
    """A fresh data directory with a migrated SQLite database (a copy of the suite's template) and the
    filesystem broker."""
    for key in list(os.environ):
        if key.startswith("COOPLAB_") and not key.startswith("COOPLAB_TEST_"):
            monkeypatch.delenv(key)
    for key, value in jobs_environment(tmp_path / "home").items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    settings.ensure_dirs()
    assert migrated_sqlite(settings.data_dir / "cooplab.db") == settings.resolved_database_url
    return settings


PLUGIN_TASKS = "tests.jobs.plugin_tasks"


@pytest.fixture
def allow_plugin_tasks(monkeypatch: pytest.MonkeyPatch) -> str:
    """Put ``tests.jobs.plugin_tasks`` on the task module allowlist as an operator does, with
    ``COOPLAB_TASK_MODULES``: for this process and for the workers the test starts. Settings read
    after this (``Settings()``) carry it, and so do the permissions built from them."""
    monkeypatch.setenv("COOPLAB_TASK_MODULES", PLUGIN_TASKS)
    return PLUGIN_TASKS


@pytest.fixture
def store(jobs_env: Settings) -> Iterator[Store]:
    with Store(jobs_env.resolved_database_url) as s:
        yield s


@pytest.fixture
def experiment_id(store: Store) -> int:
    return store.create_experiment("jobs-test").id


@pytest.fixture
def redis_env(jobs_env: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Like ``jobs_env`` with the real Redis server as broker (its own database, flushed before and after)."""
    url = redis_test_url()
    if url is None:
        pytest.skip("no Redis server configured: set COOPLAB_TEST_REDIS_URL (make test does)")
    flush_redis(url)
    monkeypatch.setenv("COOPLAB_BROKER_URL", url)
    yield Settings()
    flush_redis(url)


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real ``cooplab worker`` processes with this test's ``COOPLAB_*`` environment; every one
    (with its job processes) is killed when the test ends, pass or fail."""
    started: list[WorkerProcess] = []

    def start(device: str = "cpu", *extra: str, env_changes: dict[str, str | None] | None = None) -> WorkerProcess:
        """``env_changes``: variables to set in the worker's environment (None removes one)."""
        env = dict(os.environ)
        env["OMP_NUM_THREADS"] = "1"
        for key, value in (env_changes or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        log_path = tmp_path / f"worker-{len(started)}.log"
        with log_path.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker", "--device", device, *extra], cwd=ROOT,
                                    env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        worker = WorkerProcess(proc, log_path)
        started.append(worker)
        wait_for(lambda: " ready." in worker.log() or proc.poll() is not None, 60, "the worker to be ready")
        if proc.poll() is not None:
            raise AssertionError(f"worker exited with {proc.returncode}:\n{worker.log()}")
        return worker

    yield start
    for worker in started:
        worker.kill()
