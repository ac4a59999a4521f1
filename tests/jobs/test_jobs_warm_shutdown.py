"""A worker's warm shutdown costs no run: SIGTERM to one of two workers sharing a broker (the filesystem
broker and Redis) while runs are queued. Its own run checkpoints and ends ``stopped``; it takes no
queued run during its shutdown (a message it receives then goes back to the queue unstarted); the
other worker runs every queued run to ``succeeded``; no run is ``lost`` (:mod:`jobs.warm_shutdown`).

Redis needs ``COOPLAB_TEST_REDIS_URL`` (``make test`` sets it).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from db import states
from jobs.client import submit_run
from jobs.settings import Settings
from tests.jobs.helpers import ROOT, START_TIMEOUT_S, WorkerProcess, tiny_config, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECEIVED = re.compile(r"Task jobs\.run_training\[[0-9a-f-]+\] received")


@contextlib.contextmanager
def two_workers(folder: Path) -> Iterator[list[WorkerProcess]]:
    """Two ``cooplab worker`` processes started side by side (half the wait of one after the other);
    both killed at the end, pass or fail."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    workers = []
    try:
        for i in range(2):
            log_path = folder / f"worker-{i}.log"
            with log_path.open("wb") as out:
                proc = subprocess.Popen([sys.executable, "-m", "cooplab", "worker", "--device", "cpu"], cwd=ROOT,
                                        env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            workers.append(WorkerProcess(proc, log_path))
        for worker in workers:
            wait_for(lambda w=worker: " ready." in w.log() or w.proc.poll() is not None, 90, "a worker to be ready")
            assert worker.proc.poll() is None, worker.log()[-4000:]
        yield workers
    finally:
        for worker in workers:
            worker.kill()


def _submit_runs(plugin: str, experiment_id: int) -> list[int]:
    """Three three-step runs of half a second or more per step (the reward sleeps): two keep both
    workers busy, the third waits in the queue behind them (long enough that a worker which took it
    during its shutdown would not finish it before the shutdown kills it)."""
    slow = tiny_config(max_steps=3)
    slow["task"] = {"name": f"{plugin}:slow_quickstart", "params": {"sleep_s": 0.5}}
    settings = Settings()
    return [submit_run(slow, experiment_id=experiment_id, settings=settings) for _ in range(3)]


@pytest.mark.parametrize("broker", ["filesystem", "redis"])
def test_sigterm_to_one_of_two_workers_loses_no_run(broker, request, jobs_env, store, experiment_id, tmp_path,
                                                    allow_plugin_tasks):
    if broker == "redis":
        request.getfixturevalue("redis_env")
    assert Settings().resolved_broker_url.startswith(f"{broker}://")
    t0 = time.monotonic()
    with two_workers(tmp_path) as workers:
        ready_s = time.monotonic() - t0
        run_ids = _submit_runs(allow_plugin_tasks, experiment_id)

        def two_running():
            runs = [store.get_run(i) for i in run_ids]
            live = [r for r in runs if r.status == states.RUNNING and r.step >= 1]
            return live if len({r.worker for r in live}) == 2 else None

        live = wait_for(two_running, START_TIMEOUT_S, "both workers to train a run", interval=0.05)
        first = min(live, key=lambda r: r.step)  # the run with the most steps left: it is stopped
        leaving = next(w for w in workers if f"-{w.pid}@" in first.worker)
        staying = next(w for w in workers if w is not leaving)
        signalled = time.monotonic()
        training_s = signalled - t0
        leaving.proc.send_signal(signal.SIGTERM)

        def all_final():
            found = [store.get_run(i) for i in run_ids]
            return found if not any(r.is_active for r in found) else None

        runs = wait_for(all_final, START_TIMEOUT_S, "every run to end")
        assert leaving.proc.wait(timeout=60) == 0, leaving.log()[-4000:]
        exit_s = time.monotonic() - signalled
        seen = {r.id: (r.status, r.worker, r.error) for r in runs}
        log = leaving.log()
        shutdown_log = log[log.index("Warm shutdown"):]
        taken = len(RECEIVED.findall(shutdown_log))
        given_back = shutdown_log.count("goes back to the queue unstarted")
        print(f"\n{broker}: {seen}; leaving worker exited {exit_s:.1f} s after SIGTERM, received {taken} "
              f"message(s) during its shutdown and gave back {given_back}; workers ready at {ready_s:.1f} s, "
              f"both training at {training_s:.1f} s, all ended at {time.monotonic() - t0:.1f} s")
        assert all(r.status in (states.SUCCEEDED, states.STOPPED) for r in runs), (seen, shutdown_log[-6000:])
        assert store.get_run(first.id).status in (states.STOPPED, states.SUCCEEDED), seen  # stopped, or done first
        # it started no run during its shutdown: every message it received then went back unstarted
        assert "starting on cpu" not in shutdown_log, shutdown_log[-6000:]
        assert taken == given_back, shutdown_log[-6000:]
        assert all(r.status == states.SUCCEEDED for r in runs if r.id != first.id), seen
        assert staying.proc.poll() is None
