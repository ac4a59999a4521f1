"""DbSink against a real SQLite store: what the trainer reports ends up in the database."""

from __future__ import annotations

import time

from db import states
from engine.sinks.base import Episode, TurnRecord
from jobs.db_sink import DbSink
from tests.jobs.helpers import tiny_config, wait_for


def _episode(sample: int, reward: float) -> Episode:
    turns = (
        TurnRecord(turn=1, agent_index=0, agent_name="first", prompt="topic: birds", completion="abc",
                   reward=reward, ret=reward, advantage=0.25),
        TurnRecord(turn=1, agent_index=1, agent_name="second", prompt="topic: birds", completion="xyz",
                   reward=reward, ret=reward, advantage=-0.25),
    )
    return Episode(sample_index=sample, split="train", item_index=3, turns=turns)


def _starting_run(store, experiment_id) -> int:
    run = store.create_run(experiment_id, tiny_config(), "cpu")
    store.transition(run.id, states.STARTING)
    return run.id


def test_a_step_writes_metrics_transcripts_and_progress(store, experiment_id):
    run_id = _starting_run(store, experiment_id)
    sink = DbSink(store, run_id, worker=None, heartbeat_interval_s=30)
    try:
        sink.start(5, {})
        assert store.get_run(run_id).status == states.RUNNING
        assert store.get_run(run_id).total_steps == 5
        sink.log_step(1, 4, {"train/reward_mean": 0.5, "agent/first/loss": 1.25}, [_episode(0, 0.5)])
        sink.log_step(2, 8, {"train/reward_mean": 0.75, "agent/first/loss": 1.0}, [])
    finally:
        sink.close()
    run = store.get_run(run_id)
    assert (run.step, run.env_step) == (2, 8)
    series = store.series(run_id, "train/reward_mean")
    assert series.xs == (1.0, 2.0) and series.ys == (0.5, 0.75)
    assert store.metric_keys(run_id) == ["agent/first/loss", "train/reward_mean"]
    (episode,) = store.episodes(run_id)
    assert (episode.step, episode.item_index, episode.split) == (1, 3, "train")
    assert [t.completion for t in episode.turns] == ["abc", "xyz"]
    assert [t.advantage for t in episode.turns] == [0.25, -0.25]


def test_evaluation_reports_and_checkpoints_are_recorded(store, experiment_id):
    run_id = _starting_run(store, experiment_id)
    sink = DbSink(store, run_id, heartbeat_interval_s=30)
    sink.log_metrics(4, 16, {"eval/reward_mean": 0.9})
    sink.log_transcripts(4, [_episode(0, 0.9)])
    sink.log_checkpoint(4, "/tmp/ckpt-4")
    sink.close()
    assert store.latest_metrics(run_id)["eval/reward_mean"].value == 0.9
    assert store.episode_steps(run_id) == [4]
    assert store.latest_checkpoint(run_id).path == "/tmp/ckpt-4"
    assert store.get_run(run_id).step == 0  # evaluation does not move progress


def test_should_stop_follows_the_stop_flag(store, experiment_id):
    run_id = _starting_run(store, experiment_id)
    sink = DbSink(store, run_id, heartbeat_interval_s=30)
    sink.start(None, {})
    assert sink.should_stop() is False
    store.request_stop(run_id)
    assert sink.should_stop() is True
    assert store.get_run(run_id).status == states.STOPPING
    sink.close()


def test_a_stop_during_start_up_keeps_the_run_stopping(store, experiment_id):
    run_id = _starting_run(store, experiment_id)
    store.request_stop(run_id)
    sink = DbSink(store, run_id, heartbeat_interval_s=30)
    sink.start(3, {})
    sink.close()
    assert store.get_run(run_id).status == states.STOPPING
    assert sink.should_stop()


def test_the_heartbeat_thread_beats_between_steps_and_stops_on_close(store, experiment_id):
    run_id = _starting_run(store, experiment_id)
    sink = DbSink(store, run_id, heartbeat_interval_s=0.05)
    sink.start_heartbeat()
    first = store.get_run(run_id).heartbeat_at
    assert first is not None
    wait_for(lambda: store.get_run(run_id).heartbeat_at > first, 5, "a second heartbeat")
    sink.close()
    last = store.get_run(run_id).heartbeat_at
    time.sleep(0.3)
    assert store.get_run(run_id).heartbeat_at == last


def test_the_heartbeat_reports_a_run_settled_elsewhere(store, experiment_id):
    run_id = _starting_run(store, experiment_id)
    settled: list[str] = []
    sink = DbSink(store, run_id, heartbeat_interval_s=0.05, on_settled=settled.append)
    sink.start(3, {})
    store.request_stop(run_id)
    store.transition(run_id, states.STOPPED, error="terminated")  # what the stop enforcer does
    wait_for(lambda: settled, 5, "the settled callback")
    sink.close()
    assert settled[0] == states.STOPPED
