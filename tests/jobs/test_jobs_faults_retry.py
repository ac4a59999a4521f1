"""A run lost to a frozen worker machine is retried from its last checkpoint (the run config's
``retry.max_attempts``, :mod:`jobs.retries`): real workers, the worker and its job frozen with SIGSTOP
for longer than the heartbeat timeout, then killed (the machine never came back)."""

from __future__ import annotations

import time

import pytest

from db import states
from jobs.client import submit_run
from jobs.liveness import look
from jobs.settings import Settings
from tests.jobs.fault_helpers import assert_each_step_once, freeze_between_writes
from tests.jobs.helpers import START_TIMEOUT_S, tiny_config, wait_for, wait_until_final

HEARTBEAT_TIMEOUT_S = 10.0  # the new attempt builds its models under the load of a whole test suite
STEPS = 6


@pytest.mark.integration
@pytest.mark.slow
def test_a_run_lost_to_a_frozen_worker_is_resumed_from_its_checkpoint_and_succeeds(jobs_env, store, experiment_id,
                                                                                  start_worker, monkeypatch):
    """Before: the run ended ``lost`` and nothing queued it again (one run in the database, stopped at its
    first checkpoint)."""
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", str(HEARTBEAT_TIMEOUT_S))
    settings = Settings()
    frozen = start_worker()
    config = {**tiny_config(max_steps=STEPS, checkpoint_interval=2), "retry": {"max_attempts": 2}}
    first = submit_run(config, experiment_id=experiment_id, settings=settings)
    wait_for(lambda: store.latest_checkpoint(first) is not None, START_TIMEOUT_S, f"run {first} to save a checkpoint")
    # the worker and its job stop, like a frozen machine (between two of their writes to the SQLite file)
    freeze_between_writes(frozen.pid, settings.data_dir / "cooplab.db", group=True)
    t0 = time.monotonic()
    try:
        healthy = start_worker()  # another machine's worker, started while the heartbeat ages (the queue is empty)
        def retried() -> bool:  # by this look, as `cooplab runs` or the dashboard does
            look(store, settings)
            return len(store.list_runs()) == 2

        wait_for(retried, HEARTBEAT_TIMEOUT_S + 30, "the lost run to be queued again", interval=0.5)
        print(f"\nfrozen run lost and queued again after {time.monotonic() - t0:.1f} s "
              f"(heartbeat timeout {HEARTBEAT_TIMEOUT_S:g} s)")
    finally:
        frozen.kill()  # SIGKILL reaches a stopped process: the machine never comes back

    lost = store.get_run(first)
    assert lost.status == states.LOST and lost.error.startswith("no heartbeat for more than"), (lost.status,
                                                                                                 lost.error)
    checkpoint = store.latest_checkpoint(first)
    assert checkpoint is not None and lost.retried_as is not None
    second = lost.retried_as
    wait_until_final(store, second, START_TIMEOUT_S, healthy)
    run = store.get_run(second)
    assert run.status == states.SUCCEEDED, (run.status, run.error)
    assert (run.attempt, run.resumed_from) == (2, first)
    assert run.notes == (f"attempt 2 of 2: resumed from the checkpoint at step {checkpoint.step} after run {first} "
                         f"was lost at step {lost.step} (no heartbeat for more than {HEARTBEAT_TIMEOUT_S:g} s)")
    steps = assert_each_step_once(store, second)
    assert (steps[0], steps[-1]) == (checkpoint.step + 1, STEPS)  # continued from the checkpoint, not from 0
    assert [r.id for r in store.list_runs()] == [second, first]  # one retry, however many looked
