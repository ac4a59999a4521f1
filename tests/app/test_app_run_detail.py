"""Run detail page: live charts from the store (smoothing, raw line kept, x axes), config, logs, files."""

from __future__ import annotations

import pytest

from app.smoothing import ema
from db.store import Store


def _figure(figures: list[dict], title: str) -> dict:
    [figure] = [f for f in figures if f["layout"]["title"]["text"].startswith(title)]
    return figure


def test_charts_show_raw_and_smoothed_lines(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="running", steps=5)
    at = app("run_detail", run=run_id)
    assert not at.exception
    reward = _figure(figures(at), "reward_mean per turn")
    names = [trace["name"] for trace in reward["data"]]
    assert names == ["all turns (raw)", "all turns", "turn 1 (raw)", "turn 1"]
    raw, smoothed = reward["data"][0], reward["data"][1]
    assert raw["x"] == [1, 2, 3, 4, 5]
    assert raw["y"] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert smoothed["y"] == pytest.approx(ema([0.1, 0.2, 0.3, 0.4, 0.5], 0.6))
    assert raw["opacity"] == 0.3  # the raw line stays, faint
    loss = _figure(figures(at), "loss per agent")
    assert [t["name"] for t in loss["data"] if "raw" not in t["name"]] == ["editor", "writer"]


def test_smoothing_off_and_env_step_axis(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="succeeded", steps=3)
    at = app("run_detail", run=run_id)
    at.selectbox(key="detail_smoothing").set_value("none")
    at.radio(key="detail_x").set_value("env_step").run()
    reward = _figure(figures(at), "reward_mean per turn")
    assert [t["name"] for t in reward["data"]] == ["all turns", "turn 1"]
    assert reward["data"][0]["x"] == [4, 8, 12]
    assert reward["layout"]["xaxis"]["title"]["text"] == "env step"


def test_charts_can_be_chosen(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="succeeded", steps=2)
    at = app("run_detail", run=run_id)
    [picker] = [m for m in at.multiselect if m.label == "charts"]
    picker.set_value(["expected_return per turn"]).run()
    assert [f["layout"]["title"]["text"] for f in figures(at)] == ["expected_return per turn"]


def test_run_without_metrics_explains_what_happens_next(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="queued")
    at = app("run_detail", run=run_id)
    assert not at.exception
    assert any("No metrics logged yet" in i.value for i in at.info)
    assert any(b.key == f"detail.{run_id}.cancel" for b in at.button)


def test_config_log_tail_and_checkpoints(app, store: Store, experiment: int, seed, tmp_path) -> None:
    run_id = seed(experiment, status="failed", steps=2)
    log = tmp_path / "run.log"
    log.write_text("starting\nstep 1 loss 0.5\nTraceback: boom\n")
    ckpt = tmp_path / "ckpt-2"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    for agent in ("agent_0", "agent_1"):  # what a completed run exports: one HF folder per agent
        (tmp_path / "out" / "model" / agent).mkdir(parents=True)
        (tmp_path / "out" / "model" / agent / "config.json").write_text("{}")
    store.update_run(run_id, log_path=str(log), output_dir=str(tmp_path / "out"))
    store.add_checkpoint(run_id, 2, str(ckpt))
    at = app("run_detail", run=run_id)
    assert not at.exception
    codes = [c.value for c in at.code]
    assert any("name: demo" in c and "agents:" in c for c in codes)  # the config as YAML
    assert any(c.endswith("Traceback: boom") for c in codes)  # the log tail
    assert any("boom: a test failure" in c for c in codes)  # the failed run's error
    assert any("ckpt-2" in m.value and "step **2**" in m.value for m in at.markdown)
    exported = [m.value for m in at.markdown if "from_pretrained" in m.value]
    assert [e.split("`")[1] for e in exported] == [str(tmp_path / "out" / "model" / a) for a in ("agent_0", "agent_1")]
    labels = [b.label for b in at.get("download_button")]
    assert labels.count("zip") == 3  # one checkpoint, two exported models
    assert {"metrics CSV", "metrics JSONL", "transcripts JSONL"} <= set(labels)


def test_system_runs_get_per_trainer_and_system_charts(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="running", steps=0)
    for step in (1, 2, 3, 4):
        first_turn = step in (1, 2)  # alternating, phase_length 2: w trains, then e
        metrics = {"train/reward_mean": 0.1 * step, "system/reward_mean": 0.1 * step, "system/round": float(step),
                   "trainer/w/updated": float(first_turn), "trainer/e/updated": float(not first_turn),
                   "trainer/w/updates": float(min(step, 2)), "trainer/e/updates": float(max(step - 2, 0))}
        updating = "w" if first_turn else "e"
        metrics[f"trainer/{updating}/agent/{'writer' if first_turn else 'editor'}/loss"] = 1.0 / step
        store.log_step(run_id, step, step * 4, metrics, [], wall_time=1.7e9 + step)
    at = app("run_detail", run=run_id)
    assert not at.exception
    [picker] = [m for m in at.multiselect if m.label == "charts"]
    assert {"updated per trainer", "updates per trainer", "trainer w: loss per agent", "trainer e: loss per agent",
            "system/reward_mean", "system/round"} <= set(picker.options)
    at.selectbox(key="detail_smoothing").set_value("none").run()
    [picker] = [m for m in at.multiselect if m.label == "charts"]
    picker.set_value(["updated per trainer", "trainer e: loss per agent"]).run()
    drawn = {f["layout"]["title"]["text"]: f for f in figures(at)}
    updated = drawn["updated per trainer"]["data"]
    assert [t["name"] for t in updated] == ["e", "w"]
    assert updated[0]["y"] == [0.0, 0.0, 1.0, 1.0] and updated[1]["y"] == [1.0, 1.0, 0.0, 0.0]
    [loss] = drawn["trainer e: loss per agent"]["data"]
    assert loss["name"] == "editor" and loss["x"] == [3, 4] and loss["y"] == pytest.approx([1 / 3, 1 / 4])
