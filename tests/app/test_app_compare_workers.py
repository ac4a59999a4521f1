"""Compare page (overlaid curves, diff of only what differs) and Workers page (workers, queues, the runs
studies hold back, host)."""

from __future__ import annotations

import pytest

from db.store import Store


def test_compare_overlays_runs_and_diffs_configs(app, store: Store, experiment: int, seed, figures,
                                                 make_config) -> None:
    a = seed(experiment, status="succeeded", steps=3)
    b = seed(experiment, status="succeeded", steps=4, config=make_config(agent_learning_rate=1e-4),
             reward=lambda step: 1.0)
    at = app("compare", run=a)
    assert not at.exception
    [figure] = figures(at)
    smoothed = [t for t in figure["data"] if "raw" not in t["name"]]
    # legends name the runs (experiment, id, seed), not bare ids
    assert [t["name"] for t in smoothed] == [f"demo #{a} · seed 0", f"demo #{b} · seed 0"]
    assert smoothed[1]["x"] == [1, 2, 3, 4] and smoothed[1]["y"] == pytest.approx([1.0] * 4)
    diff = at.dataframe[0].value
    assert diff["field"].tolist() == ["trainer.agent_learning_rate"]
    assert diff[f"demo #{a}"].tolist() == ["5e-06"] and diff[f"demo #{b}"].tolist() == ["0.0001"]


def test_runs_that_differ_only_by_seed_draw_as_mean_and_band(app, store: Store, experiment: int, seed, figures,
                                                             make_config) -> None:
    runs = [seed(experiment, status="succeeded", steps=3, config=make_config(seed=s), reward=lambda step, s=s: s + step)
            for s in (1, 2, 3)]
    other = seed(experiment, status="succeeded", steps=3, config=make_config(agent_learning_rate=1e-4))
    at = app("compare", runs=",".join(str(i) for i in [*runs, other]))
    assert not at.exception
    assert at.multiselect(key="cmp_runs").value == [*runs, other]
    assert at.toggle(key="cmp_by_seed").value is True
    [figure] = figures(at)
    lines = [t for t in figure["data"] if t.get("showlegend") is not False]
    assert [t["name"] for t in lines] == [f"demo (3 seeds: #{runs[0]}, #{runs[1]}, #{runs[2]})",
                                          f"demo #{other} · seed 0"]
    mean = lines[0]
    assert mean["x"] == [1, 2, 3] and mean["y"] == pytest.approx([3.0, 4.0, 5.0])  # mean of seed + step
    upper, lower = [t for t in figure["data"] if t["name"].endswith(("upper", "lower"))][:2]
    assert upper["y"] == pytest.approx([4.0, 5.0, 6.0]) and lower["y"] == pytest.approx([2.0, 3.0, 4.0])
    at.radio(key="cmp_band").set_value("sem").run()
    [figure] = figures(at)
    upper = next(t for t in figure["data"] if t["name"].endswith("upper"))
    assert upper["y"] == pytest.approx([3.0 + 1 / 3 ** 0.5, 4.0 + 1 / 3 ** 0.5, 5.0 + 1 / 3 ** 0.5])
    at.toggle(key="cmp_by_seed").set_value(False).run()
    [figure] = figures(at)
    assert len([t for t in figure["data"] if "raw" not in t["name"]]) == 4  # one line per run again


def test_compare_needs_two_runs(app, store: Store, experiment: int, seed) -> None:
    seed(experiment, status="succeeded", steps=1)
    at = app("compare")
    assert any("at least two runs" in i.value for i in at.info)


def test_workers_and_queues(app, store: Store, experiment: int, seed) -> None:
    store.upsert_worker("cpu@box", host="box", devices=["cpu"], queues=["cpu"], pid=42)
    queued = seed(experiment, status="queued")
    at = app("workers")
    assert not at.exception
    table = at.dataframe[0].value
    assert table["worker"].tolist() == ["cpu@box"] and table["online"].tolist() == ["● online"]
    assert any(m.value.startswith("**`cpu`** · 1 waiting · served by `cpu@box`") for m in at.markdown)
    assert any(f"#{queued} demo" in m.value for m in at.markdown)
    assert [m.label for m in at.metric][:2] == ["CPU", "RAM"]


def test_runs_a_study_holds_back_are_listed_with_why(app, store: Store, experiment: int, make_config) -> None:
    from db.study_store import StudyStore
    from jobs.study_space import generate, parse_space

    lr = "trainer.agent_learning_rate"
    base = make_config()
    studies = StudyStore(store)
    study = studies.create_study("lr sweep", {"base": base, "space": {lr: [0.001, 0.01]}}, generate(
        base, parse_space({lr: [0.001, 0.01]}), seeds=2), max_concurrent=1)
    studies.claim_slots(study.id)  # one queued, three waiting for its slot
    at = app("workers")
    assert not at.exception
    assert ("- study lr sweep · 3 runs held back: at most 1 at once (the study's `max_concurrent`), 1 in flight; "
            "each is queued on `cpu` as one of them ends") in [m.value for m in at.markdown]
    studies.set_status(study.id, "stopped")
    assert any("3 runs held back: the study is stopped" in m.value for m in app("workers").markdown)
    from app.study_watch import can_resume

    # the line sends the reader to Resume all: it is enabled for children that only wait for a slot
    assert can_resume(studies.get_study(study.id), studies.trials(study.id))


def test_held_back_lines_cost_two_statements_however_many_studies(store: Store, make_config) -> None:
    """The Workers page draws them at every refresh: no statement per study, no child's config read."""
    from sqlalchemy import event

    from app.components.held_back import render_held_back
    from db.study_store import StudyStore
    from jobs.study_space import generate, parse_space

    lr = "trainer.agent_learning_rate"
    base, studies = make_config(), StudyStore(store)
    statements: list[str] = []

    def count(conn, cursor, statement, *_) -> None:  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("SELECT"):  # not SQLite's BEGIN
            statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        for number in range(3):
            study = studies.create_study(f"sweep {number}", {"base": base, "space": {lr: [0.001, 0.01]}},
                                         generate(base, parse_space({lr: [0.001, 0.01]}), seeds=2), max_concurrent=1)
            studies.claim_slots(study.id)
            statements.clear()
            render_held_back(store)
            assert len(statements) == 2, statements
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert studies.waiting_and_in_flight([study.id, study.id + 100]) == {study.id: (3, 1)}


def test_workers_empty_state(app) -> None:
    at = app("workers")
    assert any("`cooplab up` starts the dashboard with one CPU worker" in i.value for i in at.info)
