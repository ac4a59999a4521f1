"""The run header: a resumed attempt continues from the step it resumes (its checkpoint), not from 0;
a finished run shows when it ended."""

from __future__ import annotations

from datetime import timedelta

from app.components.run_controls import end_time
from db.store import Store


def test_a_resumed_run_starts_from_its_checkpoint_step(app, store: Store, experiment: int, seed, tmp_path) -> None:
    first = seed(experiment, status="stopped", steps=6)  # total_steps 12
    store.add_checkpoint(first, 6, str(tmp_path / "ckpt-6"))
    second = store.create_run(experiment, dict(store.get_run(first).config), "cpu", total_steps=12,
                              resumed_from=first).id
    at = app("run_detail", run=second)
    assert not at.exception
    step = next(m for m in at.metric if m.label == "step")
    assert step.value == "6/12"  # not "0/12" while the new attempt starts
    assert any(f"continues from step 6 (the checkpoint of #{first})" in c.value for c in at.caption)
    store.transition(second, "starting")
    store.transition(second, "running")
    store.log_step(second, 7, 28, {"train/reward_mean": 1.0}, [], wall_time=1.9e9)
    at = app("run_detail", run=second)
    assert next(m for m in at.metric if m.label == "step").value == "7/12"  # its own steps from then on
    assert not any("continues from step" in c.value for c in at.caption)


def test_a_finished_run_shows_when_it_ended_not_a_growing_heartbeat(app, store: Store, experiment: int,
                                                                    seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=2)
    ended = store.get_run(run_id).finished_at
    at = app("run_detail", run=run_id)
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert "heartbeat" not in shown  # its age would grow for ever after the run ended
    assert shown["ended (UTC)"] in (f"{ended:%H:%M}", f"{ended:%d %b}")  # the date once the day has changed
    assert end_time(ended, ended + timedelta(days=1)) == f"{ended:%d %b}" and end_time(None, ended) == "—"
    live = seed(experiment, status="running", steps=1)
    assert any(m.label == "heartbeat" for m in app("run_detail", run=live).metric)  # a live run keeps it
