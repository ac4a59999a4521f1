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
    assert names == ["all turns (raw)", "all turns"]  # one turn: its curve is the "all turns" one, drawn once
    raw, smoothed = reward["data"][0], reward["data"][1]
    assert raw["x"] == [1, 2, 3, 4, 5]
    assert raw["y"] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert smoothed["y"] == pytest.approx(ema([0.1, 0.2, 0.3, 0.4, 0.5], 0.6))
    assert raw["opacity"] == 0.3  # the raw line stays, faint
    loss = _figure(figures(at), "loss per agent")
    assert [t["name"] for t in loss["data"] if "raw" not in t["name"]] == ["editor", "writer"]


def test_smoothing_off_and_env_step_axis_kept_for_a_new_session(app, store: Store, experiment: int, seed,
                                                                figures) -> None:
    run_id = seed(experiment, status="succeeded", steps=3)
    at = app("run_detail", run=run_id)
    assert store.saved_view("owner", "run_charts", "all") is None  # the defaults shown save nothing
    at.selectbox(key="detail_smoothing").set_value("none")
    at.radio(key="detail_x").set_value("env_step").run()
    reward = _figure(figures(at), "reward_mean per turn")
    assert [t["name"] for t in reward["data"]] == ["all turns"]
    assert reward["data"][0]["x"] == [4, 8, 12]
    assert reward["layout"]["xaxis"]["title"]["text"] == "env step"
    assert store.saved_view("owner", "run_charts", "all") == {"x": "env_step", "smoothing": "none", "ema": 0.6,
                                                              "window": 10}
    at.selectbox(key="detail_smoothing").set_value("window").run()
    at.slider(key="detail_window").set_value(2).run()
    assert _figure(figures(at), "reward_mean per turn")["data"][1]["y"] == pytest.approx([0.1, 0.15, 0.25])
    assert store.saved_view("owner", "run_charts", "all") == {"x": "env_step", "smoothing": "window", "ema": 0.6,
                                                              "window": 2}
    # another browser saves later, with a weight out of the slider's range; this session's reruns change
    # nothing, so they write nothing over it
    store.save_view("owner", "run_charts", "all", {"x": "env_step", "smoothing": "ema", "ema": 1.5, "window": 2})
    at.run()
    assert store.saved_view("owner", "run_charts", "all")["ema"] == 1.5
    again = app("run_detail", run=run_id)  # a new session: the saved axis and method, the weight's default
    assert not again.exception
    assert again.radio(key="detail_x").value == "env_step" and again.selectbox(key="detail_smoothing").value == "ema"
    assert again.slider(key="detail_ema").value == 0.6


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
    at = app("run_detail", run=run_id, tab="Config")  # the open tab is in the URL; only it is drawn
    assert not at.exception
    codes = [c.value for c in at.code]
    assert any("name: demo" in c and "agents:" in c for c in codes)  # the config as YAML
    assert any("boom: a test failure" in c for c in codes)  # the failed run's error
    assert not any(c.endswith("Traceback: boom") for c in codes)  # the Logs tab is not computed
    at = app("run_detail", run=run_id, tab="Logs")
    assert any(c.value.endswith("Traceback: boom") for c in at.code)  # the log tail
    at = app("run_detail", run=run_id, tab="Checkpoints & downloads")
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


def _chart_picker(at):
    [picker] = [m for m in at.multiselect if m.label == "charts"]
    return picker


def test_team_reward_is_charted_first_once_training_metrics_arrive(app, store: Store, experiment: int, seed,
                                                                   figures) -> None:
    run_id = seed(experiment, status="running", steps=0)
    # the page opens before the first training step: only an evaluation has been logged
    store.log_metrics(run_id, 0, 0, {"eval/reward_mean": 0.2, "eval/turn_1/reward_mean": 0.2})
    at = app("run_detail", run=run_id)
    assert not at.exception
    assert "reward_mean per turn" not in _chart_picker(at).value
    for step in (1, 2):
        store.log_step(run_id, step, step * 4, {"train/reward_mean": 0.1 * step, "turn_1/reward_mean": 0.1 * step,
                                                "agent/writer/loss": 1.0}, [], wall_time=1.7e9 + step)
    at.run()  # the live fragment notices the new keys and redraws the page
    assert _chart_picker(at).value[0] == "reward_mean per turn"  # the defaults follow: team reward first
    assert [f["layout"]["title"]["text"] for f in figures(at)][0] == "reward_mean per turn"


def test_a_chart_picked_by_the_user_is_kept(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="running", steps=2)
    at = app("run_detail", run=run_id)
    _chart_picker(at).set_value(["loss per agent"]).run()
    store.log_step(run_id, 3, 12, {"train/reward_mean": 0.3, "perf/step_time_s": 1.0}, [], wall_time=1.7e9 + 3)
    at.run()
    assert _chart_picker(at).value == ["loss per agent"]


def test_a_one_point_chart_shows_its_point(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="running", steps=1)
    at = app("run_detail", run=run_id)
    reward = _figure(figures(at), "reward_mean per turn")
    assert reward["data"][0]["x"] == [1] and "markers" in reward["data"][0]["mode"]


def test_pass_at_k_is_charted_only_where_it_applies(app, store: Store, seed, make_config) -> None:
    quick = store.create_experiment("quick", config=make_config("quick")).id
    run_id = seed(quick, status="running", steps=2)
    store.log_metrics(run_id, 2, 8, {"eval/pass@1": 0.0, "eval/reward_mean": 0.3})
    at = app("run_detail", run=run_id)
    assert "eval/pass@1" not in _chart_picker(at).options  # the quick start's check: not a pass@k task
    assert "eval/reward_mean" in _chart_picker(at).options
    sampled = store.create_experiment("sampled", config=make_config("sampled", eval_samples_per_item=4)).id
    other = seed(sampled, status="running", steps=2)
    store.log_metrics(other, 2, 8, {"eval/pass@1": 0.5, "eval/pass@3": 0.7})
    at = app("run_detail", run=other)
    assert {"eval/pass@1", "eval/pass@3"} <= set(_chart_picker(at).options)


@pytest.mark.parametrize("raw", ["999", "abc"])
def test_an_unknown_run_in_the_url_says_so(app, store: Store, experiment: int, seed, raw: str) -> None:
    seed(experiment, status="succeeded", steps=1)
    at = app("run_detail", run=raw)
    assert not at.exception
    assert [e.value for e in at.error] == [f"run {raw} not found"]
    assert at.query_params["run"] == raw  # not rewritten to another run
    assert not at.metric and not at.get("plotly_chart")  # and no other run is shown
    [link] = at.main.get("page_link")
    assert link.proto.label == "Go to the runs list" and link.proto.page == "runs"


def _resumed(store: Store, experiment: int, seed) -> tuple[int, int]:
    first = seed(experiment, status="stopped", steps=6, episodes_per_step=1)
    second = store.create_run(experiment, dict(store.get_run(first).config), "cpu", total_steps=10,
                              resumed_from=first).id
    store.transition(second, "starting")
    store.transition(second, "running")
    for step in range(5, 11):  # resumed from the checkpoint of step 4: steps 5-6 are logged again
        store.log_step(second, step, step * 4, {"train/reward_mean": 1.0 + step, "turn_1/reward_mean": 1.0 + step},
                       [], wall_time=1.8e9 + step)
    return first, second


def test_a_resumed_run_is_one_history(app, store: Store, experiment: int, seed, figures) -> None:
    first, second = _resumed(store, experiment, seed)
    at = app("run_detail", run=second)
    assert not at.exception
    assert any(f"attempt 1 #{first}" in c.value and f"attempt 2 #{second}" in c.value for c in at.caption)
    assert not any("other run(s)" in m.value for m in at.markdown)  # an attempt is no other seed
    at.selectbox(key="detail_smoothing").set_value("none").run()
    reward = _figure(figures(at), "reward_mean per turn")
    line = reward["data"][0]
    assert line["x"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # one curve, each step once
    assert line["y"][3] == pytest.approx(0.4) and line["y"][4] == pytest.approx(6.0)  # the later attempt wins
    assert [a["text"] for a in reward["layout"]["annotations"]] == [f"attempt 2 (#{second})"]
    assert reward["layout"]["shapes"][0]["x0"] == 5
    # the first attempt's page shows the same history; "join attempts" off shows one attempt alone
    at = app("run_detail", run=first)
    at.selectbox(key="detail_smoothing").set_value("none").run()
    assert _figure(figures(at), "reward_mean per turn")["data"][0]["x"] == list(range(1, 11))
    at.toggle(key=f"detail_joined_{first}").set_value(False).run()
    assert _figure(figures(at), "reward_mean per turn")["data"][0]["x"] == [1, 2, 3, 4, 5, 6]


def test_a_resumed_runs_downloads_hold_the_history_the_chart_draws(app, store: Store, experiment: int, seed,
                                                                   monkeypatch) -> None:
    from app.components import downloads

    first, second = _resumed(store, experiment, seed)
    monkeypatch.setitem(downloads._route, "active", True)  # links whose files the test produces itself

    def csv_steps(at) -> list[int]:
        [link] = [h.proto.body for h in at.get("html") if "cooplab-download" in h.proto.body and "metrics.csv" in
                  h.proto.body]
        offer = downloads.lookup(link.split("/api/download/")[1].split("/")[0])
        rows = b"".join(downloads.chunks_of(offer.produce())).decode().splitlines()[1:]
        return [int(r.split(",")[1]) for r in rows if r.startswith("train/reward_mean,")]

    at = app("run_detail", run=second, tab="Checkpoints & downloads")
    assert csv_steps(at) == list(range(1, 11))  # the whole history, each step once (was 5-10 only)
    assert any("hold the whole history" in c.value for c in at.caption)
    at.toggle(key=f"detail_joined_{first}").set_value(False).run()
    assert csv_steps(at) == list(range(5, 11))  # "join attempts" off: this attempt's own rows


def test_the_run_shows_its_seed_and_links_runs_of_other_seeds(app, store: Store, seed, make_config) -> None:
    exp = store.create_experiment("seeded", config=make_config("seeded", seed=11)).id
    run_id = seed(exp, status="succeeded", steps=1)
    other = seed(exp, status="succeeded", steps=1, config=make_config("seeded", seed=12))
    at = app("run_detail", run=run_id)
    assert any("seed **11**" in m.value and "1 other run(s)" in m.value for m in at.markdown)
    [link] = [p for p in at.main.get("page_link") if "Compare the seeds" in p.proto.label]
    assert link.proto.page == "compare" and link.proto.query_string == f"runs={run_id}%2C{other}&by=seed"


def test_the_logs_tab_shows_the_whole_log_with_a_limit(app, store: Store, experiment: int, seed, tmp_path) -> None:
    run_id = seed(experiment, status="running", steps=1)
    log = tmp_path / "run.log"
    log.write_text("".join(f"step {i}\n" for i in range(1, 51)))
    store.update_run(run_id, log_path=str(log))
    at = app("run_detail", run=run_id, tab="Logs")
    [text] = [c.value for c in at.code if c.value.startswith("step 1\n")]
    assert text.splitlines() == [f"step {i}" for i in range(1, 51)]  # every line, not a two-line tail
    assert any("all 50 lines" in c.value for c in at.caption)
    log.write_text("".join(f"step {i}\n" for i in range(1, 3001)))
    at.run()
    [text] = [c.value for c in at.code if c.value.startswith("step 1001\n")]
    assert text.endswith("step 3000") and any("the last 2,000 lines" in c.value for c in at.caption)


def test_the_system_tab_shows_the_environment_and_the_last_resource_sample(app, store: Store, experiment: int,
                                                                          seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=2)
    at = app("run_detail", run=run_id, tab="System")
    assert not at.exception
    assert any("Not recorded" in c.value for c in at.caption)
    store.log_metrics(run_id, 2, None, {"resources/cpu_percent": 150.0, "resources/rss_mib": 1234.0})
    store.record_run_environment(run_id, {
        "git": {"commit": "0123456789abcdef" * 2 + "01234567", "branch": "main", "dirty": True,
                "diff": "diff --git a/x b/x\n+changed", "diff_truncated": False, "diff_chars": 27,
                "untracked": ["new.py"], "untracked_count": 1},
        "python": {"version": "3.11.7"}, "packages": {"torch": "2.13.0"}, "host": "box", "device": "cpu",
        "command": "cooplab worker --device cpu"})
    at = app("run_detail", run=run_id, tab="System")
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}  # the header's metrics too
    assert (shown["CPU"], shown["RAM"]) == ("150%", "1,234 MiB") and "GPU memory" not in shown
    text = " ".join(m.value for m in at.markdown)
    assert "git `0123456789ab` on `main` (dirty)" in text and "torch `2.13.0`" in text and "`box`" in text
    assert any(c.value == "cooplab worker --device cpu" for c in at.code)
    assert any(c.value.endswith("+changed") for c in at.code)  # the dirty diff, in its expander
    assert "environment JSON" in [b.label for b in at.get("download_button")]
