"""A real worker on the real Redis broker: submit, watch metrics and transcripts arrive, stop a run
that is stuck in a long step (the stop reaches the worker as a broadcast revoke).

Needs ``COOPLAB_TEST_REDIS_URL`` (``make test`` sets it); the tests use Redis database 12 and flush
only that one.
"""

from __future__ import annotations

import pytest

from jobs.client import submit_run
from jobs.settings import Settings
from tests.jobs.helpers import assert_forced_stop, tiny_config, wait_until_step

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_submit_train_and_stop_through_redis(redis_env, store, experiment_id, start_worker, monkeypatch,
                                             tmp_path, allow_plugin_tasks):
    assert redis_env.resolved_broker_url.startswith("redis://")
    grace_s = 2.0
    monkeypatch.setenv("COOPLAB_STOP_GRACE_S", str(grace_s))
    # a 3 s heartbeat timeout (a beat every 0.75 s): the stuck step outlives it sooner (the jobs' default is 5 s)
    monkeypatch.setenv("COOPLAB_HEARTBEAT_TIMEOUT_S", "3")
    worker = start_worker()
    config = tiny_config(max_steps=50)
    gate = tmp_path / "hang"  # quick steps until this file exists, then the reward hangs
    config["task"] = {"name": f"{allow_plugin_tasks}:slow_quickstart",
                      "params": {"sleep_s": 300, "gate_file": str(gate)}}
    run_id = submit_run(config, experiment_id=experiment_id, settings=Settings())
    wait_until_step(store, run_id, 2)
    gate.touch()
    assert store.latest_metrics(run_id)["train/reward_mean"].step >= 2
    episodes = store.episodes(run_id)
    assert episodes and {t.agent_name for t in episodes[0].turns} == {"first", "second"}
    assert_forced_stop(Settings(), store, worker, run_id, grace_s)
    assert 2 <= store.get_run(run_id).step < 50
