"""What watching a run costs: an ended run's page asks the browser for no timed reruns, and a live
page's charts read only the points logged since the last poll (issue 45, "Cost of looking")."""

from __future__ import annotations

import json

import pytest

from app.live import LiveMetrics, downsample
from db.store import Store
from tests.app.polls import Polls, statements, watch_polls


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> Polls:
    """The timed fragment reruns each page run asked the browser for (``run_every``), and ``poll(at)``."""
    return watch_polls(monkeypatch)


def test_an_ended_run_is_not_polled_a_live_one_only_in_its_open_tab(app, store: Store, experiment: int, seed,
                                                                     polls) -> None:
    ended = seed(experiment, status="succeeded", steps=4)
    at = app("run_detail", run=ended)
    assert not at.exception and at.get("plotly_chart")
    assert polls.asked == {}  # nothing on the page reruns by itself: it costs nothing while it is open
    live = seed(experiment, status="running", steps=4)
    at = app("run_detail", run=live)
    assert not at.exception
    assert list(polls.asked.values()) == [2.0]  # one region: the status and the charts (not the closed log)
    at = app("run_detail", run=live, tab="Logs")
    assert not at.exception and not at.get("plotly_chart")  # the Charts tab is not computed
    assert len(polls.asked) == 1  # one region: the status and the log
    at = app("run_detail", run=live, tab="Config")
    assert len(polls.asked) == 1  # the status only


def test_one_poll_of_a_live_page_redraws_the_status_and_the_open_tab(app, store: Store, experiment: int, seed,
                                                                     polls, tmp_path) -> None:
    """A live run's page polls one region (the browser's work per poll is mostly per rerun region): the
    open tab's live region draws the header's status in its place above the buttons, then the charts
    (or the log)."""
    run_id = seed(experiment, status="running", steps=0)
    _log(store, run_id, range(1, 6))
    at = app("run_detail", run=run_id)
    assert [m.value for m in at.metric][1].startswith("5/") and at.button[0].label == "Stop"
    _log(store, run_id, range(6, 8))
    polled = polls.poll(at)
    assert not polled.exception and not polled.button  # the buttons stay put
    assert [m.value for m in polled.metric][1].startswith("7/")  # the status, read afresh
    assert any(m["kind"] == "extend" for m in _live_messages(polled).values())  # and the charts' new points
    log = tmp_path / "run.log"
    log.write_text("step 1\n")
    store.update_run(run_id, log_path=str(log))
    at = app("run_detail", run=run_id, tab="Logs")
    _log(store, run_id, range(8, 9))
    with log.open("a") as out:
        out.write("step 2\n")
    polled = polls.poll(at)
    assert [m.value for m in polled.metric][1].startswith("8/") and polled.code[0].value == "step 1\nstep 2"


def test_a_live_page_reads_only_new_points(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="running", steps=5)
    at = app("run_detail", run=run_id)
    held = at.session_state[f"live_metrics.{run_id}"]
    assert isinstance(held, LiveMetrics) and held.rows == 5 * len(held.points)
    keys = len(held.points)
    for step in (6, 7, 8):
        store.log_step(run_id, step, step * 4, {"train/reward_mean": 0.1 * step, "turn_1/reward_mean": 0.1 * step,
                                                "turn_1/expected_return": 0.2 * step,
                                                "agent/writer/loss": 1 / step, "agent/editor/loss": 1 / step},
                       wall_time=1.7e9 + step)
    before = held.rows
    at.run()
    assert held.rows - before == 3 * keys  # the three new steps of the charted keys, nothing else
    reward = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("reward_mean per turn"))
    assert reward["data"][0]["x"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert reward["data"][0]["y"] == pytest.approx([0.1 * s for s in range(1, 9)])
    queries, rows = held.queries, held.rows
    at.run()
    assert held.rows == rows and held.queries == queries + 1  # nothing new: one query, no rows
    assert figures(at)[0]["data"][0]["x"][-1] == 8


def test_held_points_downsample_like_the_store(store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="running", steps=60, reward=lambda s: 50.0 if s == 31 else 0.01 * s)
    held = LiveMetrics(run_id)
    held.refresh(store, ["train/reward_mean"])
    mine = held.series("train/reward_mean", max_points=12)
    theirs = store.series(run_id, "train/reward_mean", max_points=12)
    assert mine.downsampled and mine.total_points == theirs.total_points == 60
    assert len(mine) <= 12 and 50.0 in mine.ys  # the spike survives
    assert (mine.xs[0], mine.xs[-1]) == (theirs.xs[0], theirs.xs[-1]) == (1.0, 60.0)
    assert downsample([0.0, 1.0, 2.0], [1.0, float("nan"), 3.0], 1) == [0, 2]


CREDIT = ("agent/writer/credit", "agent/editor/credit")


def _log(store: Store, run_id: int, steps: range) -> None:
    for step in steps:
        store.log_step(run_id, step, step * 4, {"train/reward_mean": 0.1 * step, "turn_1/reward_mean": 0.1 * step,
                                                "turn_1/expected_return": 0.2 * step, "agent/writer/loss": 1 / step,
                                                "agent/editor/loss": 1 / step, CREDIT[0]: 0.01 * step,
                                                CREDIT[1]: 0.02 * step},
                       wall_time=1.7e9 + step)


def test_a_poll_reads_only_the_new_points_and_rebuilds_only_their_figures(app, store: Store, experiment: int, seed,
                                                                           polls) -> None:
    run_id = seed(experiment, status="running", steps=0)
    _log(store, run_id, range(1, 6))
    at = app("run_detail", run=run_id)
    assert not at.exception
    held = at.session_state[f"live_metrics.{run_id}"]
    assert set(CREDIT) <= set(held.points)  # who contributed is drawn from the held points too
    drawn = at.session_state[f"detail_figures_{run_id}"]
    _log(store, run_id, range(6, 9))
    rows = held.rows
    with statements() as sent:
        polled = polls.poll(at)
    assert not polled.exception
    assert held.rows - rows == 3 * len(held.points)  # the three new steps of the charted keys, nothing else
    reads = [s for s in sent if "metrics.value" in s]
    assert len(reads) == 1, reads  # one read of metric values (the new points), none for the credit chart
    credit = [json.loads(c.proto.spec) for c in polled.get("plotly_chart") if c.proto.id and "credit" in
              json.loads(c.proto.spec)["layout"]["title"]["text"]]
    assert credit and credit[0]["data"][0]["x"][-1] == 8  # the credit lines follow the new steps
    assert not polled.get("multiselect") and not any("name: demo" in c.value for c in polled.code)  # only live parts
    specs = {look: spec for look, (_, spec) in drawn.items()}
    assert any(look[0] == "credit" for look in specs)

    with statements() as sent:
        polled = polls.poll(at)  # nothing new: nothing rebuilt, one read that brings no row
    assert held.rows - rows == 3 * len(held.points)
    assert len([s for s in sent if "metrics.value" in s]) == 1
    assert all(drawn[look][1] is spec for look, spec in specs.items())  # the same figures, not rebuilt


def _live_messages(tree) -> dict[str, dict]:
    """The live charts' messages a page run or poll sent their frame, by chart."""
    frames = [json.loads(c.proto.json_args) for c in tree.get("component_instance")
              if c.proto.component_name.endswith(".live_chart")]
    return {m["chart"]: m for frame in frames for m in frame["charts"]}


def test_a_poll_sends_a_live_chart_only_its_new_points(app, store: Store, experiment: int, seed, polls) -> None:
    """A live run's charts are the appending component, all in one frame (mounted before the first chart):
    the page sends each whole once, a poll only the points logged since (``extend``), a poll with nothing
    new nothing (``same``); an ended run's are ``st.plotly_chart``."""
    run_id = seed(experiment, status="running", steps=0)
    empty = app("run_detail", run=run_id)  # before the first step: the frame is there, with no chart yet
    assert [json.loads(c.proto.json_args)["charts"] for c in empty.get("component_instance")
            if c.proto.component_name.endswith(".live_chart")] == [[]]
    _log(store, run_id, range(1, 21))
    at = app("run_detail", run=run_id)
    first = _live_messages(at)
    assert len(first) >= 2 and all(m["kind"] == "full" for m in first.values())
    assert len([c for c in at.get("component_instance") if c.proto.component_name.endswith(".live_chart")]) == 1
    assert not [c for c in at.get("plotly_chart") if "reward_mean per turn" in c.proto.spec]
    _log(store, run_id, range(21, 24))
    polled = _live_messages(polls.poll(at))
    reward = next(m for chart, m in polled.items() if "reward_mean per turn" in chart)
    assert reward["kind"] == "extend" and reward["base"] == first[next(iter(
        c for c in first if "reward_mean per turn" in c))]["seq"]
    added = json.loads(reward["payload"])
    assert added["x"] and all(xs == [21, 22, 23] for xs in added["x"])  # each line: the three new steps only
    assert len(reward["payload"]) < len(first[reward["chart"]]["payload"]) / 4
    again = _live_messages(polls.poll(at))
    assert all(m["kind"] == "same" and "payload" not in m for m in again.values())  # nothing new: nothing sent
    store.transition(run_id, "succeeded")
    ended = app("run_detail", run=run_id)
    assert not _live_messages(ended) and ended.get("plotly_chart")


def test_only_a_figure_that_grows_is_sent_as_its_new_points() -> None:
    """What the server sends a live chart's frame (``app.components.live_chart.message``): the new points
    of a figure that only grew; the whole figure when anything else changed, after a full page run, and
    when the frame asks; nothing when nothing is new."""
    from app.components.charts import line_spec
    from app.components.live_chart import extension, message
    from db.records import Series

    def spec(n: int, **look) -> dict:
        ys = [float("nan") if i == 15 else 0.1 * i for i in range(1, n + 1)]
        series = Series(run_id=1, key="k", x="step", xs=tuple(float(i) for i in range(1, n + 1)), ys=tuple(ys),
                        total_points=n, downsampled=False)
        return line_spec([("a", series)], title="t", **look)

    first, sent = message(None, spec(20), generation=1, asked=0)
    assert first["kind"] == "full" and first["seq"] == 1
    grown, sent = message(sent, spec(23), generation=1, asked=0)
    added = json.loads(grown["payload"])
    assert grown["kind"] == "extend" and grown["base"] == 1 and grown["seq"] == 2
    assert added["traces"] == [0, 1] and added["x"] == [[21, 22, 23]] * 2  # raw and smoothed (NaN kept equal)
    same, sent = message(sent, spec(23), generation=1, asked=0)
    assert same == {"chart": "", "seq": 2, "kind": "same"}
    assert extension(spec(23), spec(24, amount=0.3)) is None  # another smoothing: earlier points moved
    assert extension(spec(12), spec(13)) is None  # the markers go at 13 points: a style change
    assert extension(spec(23, height=300), spec(24, height=400)) is None  # another layout
    assert extension(spec(24), spec(23)) is None  # fewer points (a shorter attempt, a zoom)
    assert message(sent, spec(24), generation=2, asked=0)[0]["kind"] == "full"  # a full page run
    asked, sent = message(sent, spec(24), generation=1, asked=1)
    assert asked["kind"] == "full" and sent.asked == 1  # the frame asked, once
    assert message(sent, spec(25), generation=1, asked=1)[0]["kind"] == "extend"


def test_a_run_that_starts_training_does_not_redraw_the_page(app, store: Store, experiment: int, seed,
                                                              polls) -> None:
    """From starting to running the page shows the same buttons: a poll redraws the status only (a whole
    redraw, as costly in the browser as opening the page, fell on the run's first training steps); a
    state with other buttons (stopping) redraws the page."""
    run_id = seed(experiment, status="queued", steps=0)
    store.transition(run_id, "starting")
    at = app("run_detail", run=run_id)
    store.transition(run_id, "running")
    polled = polls.poll(at)
    assert not polled.title and any(m.value.endswith("running]") for m in polled.metric)  # the status only
    store.transition(run_id, "stopping")
    assert polls.poll(at).title  # the Stop button goes: the whole page again


def test_a_poll_of_the_log_reads_only_the_new_lines(app, store: Store, experiment: int, seed, polls, tmp_path) -> None:
    run_id = seed(experiment, status="running", steps=1)
    log = tmp_path / "run.log"
    log.write_text("".join(f"step {i} " + "x" * 60 + "\n" for i in range(1, 1001)))
    store.update_run(run_id, log_path=str(log))
    at = app("run_detail", run=run_id, tab="Logs")
    follow = at.session_state[f"live_log.{run_id}"]
    before = follow.bytes_read
    assert before == log.stat().st_size
    with log.open("a") as out:
        out.write("step 1001 the new line\n")
    polled = polls.poll(at)
    assert follow.bytes_read - before == len("step 1001 the new line\n")  # only what was appended
    [text] = [c.value for c in polled.code]
    assert text.startswith("step 1 ") and text.endswith("step 1001 the new line")
    assert any("all 1,001 lines" in c.value for c in polled.caption)


def test_a_spec_figure_sends_what_a_plotly_figure_would() -> None:
    """The run page hands its specs to ``st.plotly_chart`` without ``go.Figure`` (whose copies and checks
    were most of a poll): Streamlit sends the same JSON, the layout template included."""
    import plotly.io as pio
    import plotly.tools
    import streamlit.elements.plotly_chart  # noqa: F401 - sets Streamlit's template as the default

    from app.components.charts import SpecFigure, line_figure, line_spec
    from db.records import Series

    def sent(figure) -> dict:
        return json.loads(pio.to_json(plotly.tools.return_figure_from_figure_or_data(figure, True), validate=False))

    series = Series(run_id=1, key="k", x="step", xs=(1.0, 2.0, 3.0), ys=(0.1, 0.3, 0.2), total_points=3,
                    downsampled=False)
    look = {"title": "k", "boundaries": [(2.0, "attempt 2")]}
    assert sent(SpecFigure(line_spec([("a", series)], **look))) == sent(line_figure([("a", series)], **look))
    assert sent(SpecFigure(line_spec([("a", series)])))["layout"]["template"] == pio.templates["streamlit"].to_plotly_json()


def test_a_joined_history_follows_an_attempt_that_begins_logging(app, store: Store, experiment: int, seed,
                                                                  figures, polls, tmp_path) -> None:
    """The page of a resumed run opened before the new attempt's first step: a poll that finds the attempt
    logging redraws the history line and one joined curve marked where attempt 2 begins."""
    first = seed(experiment, status="stopped", steps=6)
    store.add_checkpoint(first, 6, str(tmp_path / "ckpt-6"))
    second = store.create_run(experiment, dict(store.get_run(first).config), "cpu", total_steps=12,
                              resumed_from=first).id
    store.transition(second, "starting")
    store.transition(second, "running")
    at = app("run_detail", run=second)
    assert any("no steps of its own yet" in c.value for c in at.caption)
    for step in (7, 8):
        store.log_step(second, step, step * 4, {"train/reward_mean": 0.1 * step}, [], wall_time=1.9e9 + step)
    drawn = polls.poll(at)  # the charts' poll finds attempt 2 logging: the whole page is drawn again
    assert not drawn.exception
    history = [c.value for c in drawn.caption if c.value.startswith("History:")]
    assert history and "no steps of its own yet" not in history[0], history
    reward = next(f for f in figures(drawn) if f["layout"]["title"]["text"].startswith("reward_mean"))
    assert reward["data"][0]["x"][-2:] == [7, 8] and max(reward["data"][0]["x"]) == 8
    notes = " ".join(str(a.get("text", "")) for a in reward["layout"].get("annotations", []))
    assert "attempt 2" in notes, notes
