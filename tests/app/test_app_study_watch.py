"""Watching a study: the study just queued is the one watched, and Stop all / Resume all are offered
only when there is something to stop or resume."""

from __future__ import annotations

from db import states
from db.store import Store
from db.study_store import StudyStore
from tests.app.test_app_studies import _finished_study


def test_after_queue_the_watch_tab_shows_the_new_study(app, store: Store, experiment: int, make_config) -> None:
    old = _finished_study(store, experiment, make_config)
    at = app("studies")
    at.selectbox(key="st_pick").set_value(old).run()  # watching the earlier study in this session
    at.button(key="st_queue").click().run()
    assert not at.exception
    new = next(s.id for s in StudyStore(store).list_studies() if s.id != old)
    assert at.selectbox(key="st_pick").value == new
    assert not at.warning  # no "widget ... set via the Session State API" complaint


def test_stop_all_and_resume_all_only_when_they_can_do_something(app, store: Store, experiment: int,
                                                                 make_config) -> None:
    study_id = _finished_study(store, experiment, make_config)
    at = app("studies", study=study_id)
    assert not at.exception
    assert at.button(key="st_stop").disabled and at.button(key="st_resume").disabled  # all four succeeded
    studies = StudyStore(store)
    run_id = studies.trials(study_id)[0].run_id
    assert store.get_run(run_id).status == states.SUCCEEDED


def test_stop_all_while_children_run_then_resume_all(app, store: Store, experiment: int, make_config) -> None:
    from jobs.study_space import generate, parse_space

    base = make_config()
    space = {"trainer.agent_learning_rate": [0.001]}
    studies = StudyStore(store)
    study = studies.create_study("live", {"base": base, "space": space}, generate(base, parse_space(space), seeds=1),
                                 max_concurrent=1)
    [run_id] = studies.claim_slots(study.id)
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    at = app("studies", study=study.id)
    assert not at.button(key="st_stop").disabled and at.button(key="st_resume").disabled  # running: stop only
    store.request_stop(run_id)
    store.transition(run_id, states.STOPPED)
    studies.set_status(study.id, "stopped")
    at = app("studies", study=study.id)
    assert at.button(key="st_stop").disabled and not at.button(key="st_resume").disabled  # stopped: resume only
