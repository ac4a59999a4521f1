"""The study scheduler on a real SQLite store and the filesystem broker: the cap, top-ups when children
end (failed and lost ones too), finishing, early stopping by the median rule, stop-all and
resume-all, and the results from stored metrics. (The real workers run in test_jobs_study_workers.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from db import states
from db.store import Store
from db.study_records import ACTIVE, FINISHED, PENDING, STOPPED
from db.study_store import StudyStore
from jobs.maintenance import run_maintenance
from jobs.studies import (
    after_run,
    create_study,
    find_study,
    resume_study,
    schedule_studies,
    schedule_study,
    stop_study,
)
from jobs.study_results import best_point, point_results, results_csv
from jobs.study_rules import median_rule, spread
from jobs.study_space import StudySpaceError
from tests.jobs.helpers import tiny_config

LR = "trainer.agent_learning_rate"


def _spec(name: str = "grid", **extra: object) -> dict:
    return {"name": name, "base": tiny_config(max_steps=2), "seeds": 2, "max_concurrent": 3,
            "space": {LR: [0.001, 0.01], "trainer.num_generations": [2, 4]}, **extra}


def _run(store: Store, run_id: int) -> None:
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)


def _end(store: Store, run_id: int, to: str = states.SUCCEEDED) -> None:
    _run(store, run_id)
    store.transition(run_id, to, error="boom" if to == states.FAILED else None)


def _in_flight(studies: StudyStore, study_id: int) -> list:
    return [t for t in studies.trials(study_id) if t.status in states.ACTIVE_STATUSES]


def test_children_are_queued_up_to_the_cap_and_topped_up_as_they_end(jobs_env, store: Store) -> None:
    study = create_study(_spec(), settings=jobs_env)
    studies = StudyStore(store)
    assert find_study("grid", settings=jobs_env, store=store).id == study.id == find_study(str(study.id), store=store).id
    trials = studies.trials(study.id)
    assert len(trials) == 8 and len(_in_flight(studies, study.id)) == 3
    assert all(store.get_run(t.run_id).celery_task_id for t in _in_flight(studies, study.id))  # sent
    first, second, third = (t.run_id for t in _in_flight(studies, study.id))
    _end(store, first)
    assert len(after_run(first, settings=jobs_env).queued) == 1
    _end(store, second, states.FAILED)  # a failed child does not stop the study
    assert len(after_run(second, settings=jobs_env).queued) == 1
    _run(store, third)  # its worker then dies: no more heartbeats
    before = {t.run_id for t in _in_flight(studies, study.id)}
    later = datetime.now(UTC) + timedelta(seconds=jobs_env.heartbeat_timeout_s + 1)
    # one maintenance pass (every worker's timer runs it): the reaper settles the run lost, the study tops up
    run_maintenance(jobs_env, store=store, reconcile=False, now=later)
    assert store.get_run(third).status == states.LOST
    assert len({t.run_id for t in _in_flight(studies, study.id)} - before) == 1
    assert schedule_studies(settings=jobs_env, store=store)[0].queued == ()  # the cap is full again
    assert len(_in_flight(studies, study.id)) == 3
    while waiting := _in_flight(studies, study.id):
        for trial in waiting:
            _end(store, trial.run_id)
        report = schedule_study(study.id, settings=jobs_env, store=store)
    assert report.finished and studies.get_study(study.id).status == FINISHED
    final = [t.status for t in studies.trials(study.id)]
    assert (final.count(states.SUCCEEDED), final.count(states.FAILED), final.count(states.LOST)) == (6, 1, 1)
    with pytest.raises(LookupError, match="no study named or numbered 'nope'"):
        find_study("nope", store=store)


def test_a_study_created_while_the_broker_is_down_keeps_its_children_queued(jobs_env, store: Store,
                                                                           monkeypatch) -> None:
    """As a run submitted then (`cooplab submit`, Launch): queued, never failed; the reconciler sends
    them when the broker answers (tests/jobs/test_jobs_faults.py runs a submit through a Redis restart)."""
    from jobs.settings import Settings
    from tests.jobs.fault_helpers import free_port

    monkeypatch.setenv("COOPLAB_BROKER_URL", f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    study = create_study(_spec("down", seeds=1, max_concurrent=2), settings=Settings())
    in_flight = _in_flight(StudyStore(store), study.id)
    assert len(in_flight) == 2
    assert [store.get_run(t.run_id).status for t in in_flight] == [states.QUEUED, states.QUEUED]
    assert not any(r.status == states.FAILED for r in store.list_runs())


def test_an_invalid_point_stores_nothing(jobs_env, store: Store) -> None:
    with pytest.raises(StudySpaceError, match=rf"point 1 \({LR}=-0.1\) gives an invalid run config:\n{LR}: "):
        create_study({**_spec(), "space": {LR: [0.1, -0.1]}}, settings=jobs_env)
    assert StudyStore(store).list_studies() == [] and store.list_runs() == []


def test_the_median_rule_stops_a_clearly_worse_running_child_with_its_reason(jobs_env, store: Store) -> None:
    spec = _spec("early", seeds=[0, 1, 2], max_concurrent=5, early_stopping={"min_steps": 2, "min_trials": 3})
    study = create_study(spec, settings=jobs_env)
    studies = StudyStore(store)
    runs = [t.run_id for t in sorted(studies.trials(study.id), key=lambda t: t.run_id or 10**9)][:5]
    completed, bad, good = runs[:3], runs[3], runs[4]
    for run_id, reward in zip(completed, [0.5, 0.6, 0.7], strict=True):
        _run(store, run_id)
        for step in (1, 2, 3):
            store.log_step(run_id, step, step, {"train/reward_mean": reward})
        store.transition(run_id, states.SUCCEEDED)
    for run_id, reward in ((bad, 0.1), (good, 0.65)):
        _run(store, run_id)
        store.log_step(run_id, 1, 1, {"train/reward_mean": reward})
    assert schedule_study(study.id, settings=jobs_env, store=store).stopped_early == ()  # step 1 < min_steps
    for run_id, reward in ((bad, 0.1), (good, 0.65)):
        store.log_step(run_id, 2, 2, {"train/reward_mean": reward})
    assert schedule_study(study.id, settings=jobs_env, store=store).stopped_early == (bad,)
    trial = studies.trial_of_run(bad)
    assert trial.status == states.STOPPING and store.get_run(bad).stop_requested
    assert trial.stop_reason == ("median rule at step 2: mean train/reward_mean so far 0.1 is below the median 0.6 "
                                 "of 3 completed runs at that step")
    assert store.get_run(bad).notes == f"stopped early by study early: {trial.stop_reason}"  # the run's page says why
    assert store.get_run(good).status == states.RUNNING and studies.trial_of_run(good).stop_reason is None


def test_the_median_rule_by_hand() -> None:
    good = [(1, 0.4), (2, 0.6), (3, 0.8)]  # means 0.4, 0.5, 0.6
    assert median_rule([(1, 0.0), (2, 0.2)], [good, good], metric="m", min_steps=1, min_trials=2).stop
    assert median_rule([(1, 0.0), (2, 0.6)], [good, good], metric="m", min_steps=1, min_trials=2).stop  # 0.3 < 0.5
    assert not median_rule([(1, 0.4), (2, 0.6)], [good, good], metric="m", min_steps=1, min_trials=2).stop  # 0.5 = 0.5
    assert median_rule([(1, 0.4), (2, 0.6)], [good, good], metric="m", min_steps=1, min_trials=2).step == 2
    assert not median_rule([(1, 0.0)], [good], metric="m", min_steps=1, min_trials=2).stop  # too few peers
    assert not median_rule([(1, 0.0)], [good, good], metric="m", min_steps=2, min_trials=2).stop  # too early
    assert not median_rule([(3, 0.0)], [[(1, 1.0)], [(2, 1.0)]], metric="m", min_steps=1, min_trials=1).stop  # none reached
    assert spread([1.0, 2.0, 3.0]) == spread([3.0, None, 2.0, float("nan"), 1.0])
    assert (spread([1.0, 2.0, 3.0]).mean, spread([1.0, 2.0, 3.0]).std, spread([5.0]).std) == (2.0, 1.0, 0.0)


def test_stop_all_then_resume_all(jobs_env, store: Store) -> None:
    study = create_study(_spec("stopper", max_concurrent=2), settings=jobs_env)
    studies = StudyStore(store)
    running, queued = (t.run_id for t in _in_flight(studies, study.id))
    _run(store, running)
    assert stop_study(study.id, settings=jobs_env) == 2
    assert (store.get_run(running).status, store.get_run(queued).status) == (states.STOPPING, states.CANCELLED)
    assert studies.get_study(study.id).status == STOPPED
    assert schedule_study(study.id, settings=jobs_env, store=store).queued == ()
    store.transition(running, states.STOPPED)  # the trainer honoured its stop flag
    assert resume_study(study.id, settings=jobs_env) == 2
    assert studies.get_study(study.id).status == ACTIVE
    trials = studies.trials(study.id)
    again = [t for t in trials if t.previous_run_ids]
    assert sorted(t.previous_run_ids[0] for t in again) == sorted([running, queued])
    assert all(t.status == states.QUEUED for t in again) and sum(t.status == PENDING for t in trials) == 6


def test_results_are_spreads_over_seeds_of_the_stored_metrics(jobs_env, store: Store) -> None:
    study = create_study(_spec("results", max_concurrent=8), settings=jobs_env)
    studies = StudyStore(store)
    trials = studies.trials(study.id)
    curves = {0: ([0.1, 0.5, 0.3], [0.2, 0.4, 0.5]), 1: ([0.0, 0.9, 0.8], [0.3, 0.2, 0.6])}
    for trial in trials:
        if trial.point in curves:
            for step, value in enumerate(curves[trial.point][trial.seed_index]):
                store.log_step(trial.run_id, step, step, {"train/reward_mean": value})
            _end(store, trial.run_id)
        elif trial.point == 2 and trial.seed_index == 0:
            store.log_step(trial.run_id, 0, 0, {"train/reward_mean": 9.0})
            _end(store, trial.run_id, states.FAILED)  # a failed child's values are not results
    results = point_results(studies, study.id, keys=["train/reward_mean"])
    first, second, third = results[0], results[1], results[2]
    assert first.params == {LR: 0.001, "trainer.num_generations": 2} and first.statuses == {"succeeded": 2}
    key = "train/reward_mean"
    assert first.final[key].mean == pytest.approx(0.4) and first.final[key].std == pytest.approx(0.1414213562)
    assert first.best[key].mean == pytest.approx(0.5) and first.best[key].std == pytest.approx(0.0)
    assert second.final[key].mean == pytest.approx(0.7) and second.best[key].mean == pytest.approx(0.75)
    assert third.final == {} and third.statuses == {"failed": 1, "queued": 1}
    assert best_point(results, key).point == 1 and best_point(results, key, use="best").point == 1
    text = results_csv(results, [key]).splitlines()
    assert text[0] == (f"point,{LR},trainer.num_generations,children,{key} final mean,{key} final std,"
                       f"{key} best mean,{key} best std,{key} n")
    assert text[1].startswith("0,0.001,2,2 succeeded,0.4") and text[3] == "2,0.01,2,\"1 failed, 1 queued\",,,,,0"
