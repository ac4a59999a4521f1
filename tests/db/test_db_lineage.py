"""A run and its resumed attempts as one history: the chain of attempts, the steps each owns, the
joined series (each step once, the later attempt winning) and the transcript steps along it."""

from __future__ import annotations

import json

from db.ops_lineage import chain, ownership
from db.store import Store
from engine.transcripts import Episode, TurnRecord


def _episode() -> Episode:
    return Episode(sample_index=0, split="train", item_index=0,
                   turns=(TurnRecord(1, 0, "a", "p", "c", 1.0, 1.0, 0.0),))


def _attempt(store: Store, experiment_id: int, steps: range, value: float, resumed_from: int | None = None,
             episodes: bool = False) -> int:
    run = store.create_run(experiment_id, {"seed": 1}, "cpu", total_steps=30, resumed_from=resumed_from)
    store.transition(run.id, "starting")
    store.transition(run.id, "running")
    for step in steps:
        store.log_step(run.id, step, step * 10, {"train/reward_mean": value + step / 100},
                       [_episode()] if episodes else [], wall_time=1000.0 * run.id + step)
    store.request_stop(run.id)
    store.transition(run.id, "stopped")
    return run.id


def test_chain_follows_parents_and_the_newest_resume() -> None:
    parents = {1: None, 2: 1, 3: 2, 4: 1, 5: None, 6: 3}
    assert chain(parents, 1) == [1, 4]  # 1 was resumed twice: the newest resume (4) continues it
    assert chain(parents, 2) == [1, 2, 3, 6]
    assert chain(parents, 6) == [1, 2, 3, 6]
    assert chain(parents, 5) == [5]
    assert chain({7: 8, 8: 7}, 7) == [8, 7]  # a cycle (impossible in practice) ends the walk


def test_ownership_later_attempt_wins() -> None:
    attempts = ownership([(1, 1, "stopped", 20, 1), (2, 2, "stopped", 30, 17), (3, 3, "queued", 0, None)])
    assert [(a.owns_from, a.owns_to, a.owns_nothing) for a in attempts] == [
        (None, 16, False), (17, None, False), (None, None, True)]
    # an attempt resumed from an earlier checkpoint than the one before it hides that one entirely
    attempts = ownership([(1, 1, "stopped", 20, 1), (2, 2, "stopped", 25, 17), (3, 3, "running", 12, 10)])
    assert [(a.owns_from, a.owns_to, a.owns_nothing) for a in attempts] == [
        (None, 9, False), (17, 9, True), (10, None, False)]


def test_lineage_and_joined_series(store: Store, experiment_id: int) -> None:
    first = _attempt(store, experiment_id, range(1, 21), 0.0, episodes=True)
    second = _attempt(store, experiment_id, range(17, 31), 1.0, resumed_from=first, episodes=True)
    other = _attempt(store, experiment_id, range(1, 5), 5.0)

    history = store.lineage(first)
    assert history.run_ids == (first, second) == store.lineage(second).run_ids
    assert history.joined and history.root == first and history.latest == second
    assert store.lineage(other).run_ids == (other,) and not store.lineage(other).joined
    assert history.owner(16) == first and history.owner(17) == second

    joined = store.joined_series(history, "train/reward_mean")
    xs, ys = joined.series.xs, joined.series.ys
    assert xs == tuple(float(s) for s in range(1, 31))  # each step once
    assert ys[15] == 0.16 and ys[16] == 1.17  # step 17 comes from the later attempt
    assert joined.boundaries == ((17.0, 2, second),)
    assert joined.series.total_points == 30 and not joined.series.downsampled

    # along env_step the same steps are kept (step bounds apply whatever the x axis)
    by_env = store.joined_series(history, "train/reward_mean", x="env_step")
    assert by_env.series.xs == tuple(float(10 * s) for s in range(1, 31))
    assert by_env.boundaries[0][0] == 170.0

    # a downsampled history keeps the budget and stays ordered
    small = store.joined_series(history, "train/reward_mean", max_points=20)
    assert len(small.series) <= 40 and list(small.series.xs) == sorted(small.series.xs)

    # transcripts along the history: each step once, from its owner
    steps = store.lineage_episode_steps(history)
    assert [s for s, _ in steps] == list(range(1, 31))
    assert dict(steps)[16] == first and dict(steps)[17] == second

    # the downloads hold what the chart draws: each step once, from its owner (not the latest attempt only)
    points = [p for p in store.iter_lineage_metrics(history) if p.key == "train/reward_mean"]
    assert [p.step for p in points] == list(range(1, 31))
    assert [p.value for p in points][15:17] == [0.16, 1.17]
    csv_rows = "".join(store.stream_lineage_metrics_csv(history)).splitlines()
    assert len(csv_rows) == 1 + 30 and csv_rows[1].startswith("train/reward_mean,1,10,")
    assert "".join(store.stream_lineage_metrics_jsonl(history)).count("\n") == 30
    episodes = [json.loads(line) for line in "".join(store.stream_lineage_episodes_jsonl(history, batch_size=7))
                .splitlines()]
    assert [e["step"] for e in episodes] == list(range(1, 31))


def test_series_step_bounds_on_other_axes(store: Store, run_id: int) -> None:
    for step in range(1, 11):
        store.log_step(run_id, step, step * 3, {"m": float(step)}, wall_time=100.0 + step)
    part = store.series(run_id, "m", x="wall_time", step_min=3, step_max=5)
    assert part.ys == (3.0, 4.0, 5.0) and part.xs == (103.0, 104.0, 105.0)
    assert store.series(run_id, "m", step_min=8).xs == (8.0, 9.0, 10.0)
    assert store.series(run_id, "m", x_min=2, step_max=3).xs == (2.0, 3.0)


def test_a_fresh_resume_without_steps_leaves_the_history_to_the_earlier_attempt(store: Store,
                                                                                 experiment_id: int) -> None:
    first = _attempt(store, experiment_id, range(1, 6), 0.0)
    waiting = store.create_run(experiment_id, {"seed": 1}, "cpu", resumed_from=first).id
    history = store.lineage(waiting)
    assert history.run_ids == (first, waiting)
    joined = store.joined_series(history, "train/reward_mean")
    assert joined.series.xs == (1.0, 2.0, 3.0, 4.0, 5.0) and joined.boundaries == ()


def test_run_tags_lists_every_tag_runs_carry(store: Store, experiment_id: int) -> None:
    first = store.create_run(experiment_id, {"seed": 1}, "cpu", tags=["b", "a"]).id
    store.create_run(experiment_id, {"seed": 1}, "cpu")
    store.set_run_notes(first, tags=["lr-sweep", "a"])
    assert store.run_tags() == ["a", "lr-sweep", "t1"]  # t1: their experiment's tag
