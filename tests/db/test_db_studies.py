"""Studies and their children in the store (SQLite, and PostgreSQL when it answers)."""

from __future__ import annotations

import math
import threading

import pytest

from db import states
from db.errors import DuplicateNameError, NotFoundError, RunActiveError
from db.store import Store
from db.study_records import ACTIVE, PENDING, STOPPED, TrialInput
from db.study_store import StudyStore


def _trials(points: int, seeds: int) -> list[TrialInput]:
    return [TrialInput(point=p, seed_index=i, seed=100 + i, params={"trainer.agent_learning_rate": 10.0 ** -p},
                       config={"name": "s", "trainer": {"max_steps": 5, "seed": 100 + i,
                                                        "agent_learning_rate": 10.0 ** -p}})
            for p in range(points) for i in range(seeds)]


def _make(store: Store, name: str = "lr", points: int = 3, seeds: int = 2, cap: int = 2):
    studies = StudyStore(store)
    study = studies.create_study(name, {"base": {"name": "s"}, "method": "grid"}, _trials(points, seeds),
                                 queue="cpu", max_concurrent=cap, description="learning rates")
    return studies, study


def _finish(store: Store, run_id: int, to: str = states.SUCCEEDED) -> None:
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    if to == states.STOPPED:
        store.request_stop(run_id)
    store.transition(run_id, to)


def test_a_study_is_stored_with_its_waiting_children_in_an_experiment_of_its_own(store: Store) -> None:
    studies, study = _make(store)
    assert (study.status, study.queue, study.max_concurrent) == (ACTIVE, "cpu", 2)
    assert store.get_experiment(study.experiment_id).name == "study: lr"
    trials = studies.trials(study.id)
    assert [(t.point, t.seed_index) for t in trials] == [(p, i) for p in range(3) for i in range(2)]
    assert {t.status for t in trials} == {PENDING} and all(t.run_id is None for t in trials)
    assert trials[3].params == {"trainer.agent_learning_rate": 0.1} and trials[3].seed == 101
    assert studies.find_study("lr").id == study.id and studies.find_study("other") is None
    assert [s.name for s in studies.list_studies(statuses=[ACTIVE])] == ["lr"]
    with pytest.raises(DuplicateNameError, match="study named 'lr' already exists"):
        _make(store)
    with pytest.raises(ValueError, match="max_concurrent must be at least 1"):
        _make(store, name="zero", cap=0)
    with pytest.raises(ValueError, match="unknown study status 'paused'"):
        studies.set_status(study.id, "paused")
    with pytest.raises(NotFoundError, match="no study with id 999"):
        studies.get_study(999)


def test_claims_fill_the_free_slots_seed_by_seed_and_never_more(store: Store) -> None:
    studies, study = _make(store, cap=2)
    first = studies.claim_slots(study.id)
    assert len(first) == 2 and studies.claim_slots(study.id) == []
    trials = {t.run_id: t for t in studies.trials(study.id) if t.run_id}
    assert sorted((t.point, t.seed_index) for t in trials.values()) == [(0, 0), (1, 0)]  # seed 0 of each point first
    run = store.get_run(first[0])
    assert run.status == states.QUEUED and run.experiment_id == study.experiment_id and run.total_steps == 5
    assert run.tags == ("study:lr", f"point:{trials[run.id].point}") and run.config == trials[run.id].config
    assert studies.trial_of_run(run.id).id == trials[run.id].id and studies.trial_of_run(10_000) is None
    _finish(store, first[0], states.FAILED)  # a failed child frees its slot; the study goes on
    third = studies.claim_slots(study.id)
    assert len(third) == 1
    by_run = {t.run_id: t for t in studies.trials(study.id)}
    assert by_run[first[0]].status == states.FAILED and by_run[third[0]].status == states.QUEUED
    studies.set_max_concurrent(study.id, 4)
    assert len(studies.claim_slots(study.id)) == 2


def test_a_stopped_study_claims_nothing_and_resume_releases_what_stop_all_ended(store: Store) -> None:
    studies, study = _make(store, points=2, seeds=2, cap=4)
    runs = studies.claim_slots(study.id)
    _finish(store, runs[0])                       # succeeded: kept
    _finish(store, runs[1], states.STOPPED)       # stopped early by the study: kept
    early = studies.trial_of_run(runs[1])
    studies.stop_early(early.id, "median rule: 0.1 < median 0.5 at step 3")
    store.request_stop(runs[2])                   # cancelled by stop-all: released
    store.transition(runs[3], states.STARTING)
    store.transition(runs[3], states.LOST, error="worker died")  # lost: released
    studies.set_status(study.id, STOPPED)
    assert studies.claim_slots(study.id) == []
    assert studies.release_for_resume(study.id) == 2
    assert studies.get_study(study.id).status == ACTIVE
    trials = {t.id: t for t in studies.trials(study.id)}
    assert trials[early.id].stop_reason.startswith("median rule") and trials[early.id].status == states.STOPPED
    released = [t for t in trials.values() if t.status == PENDING]
    assert sorted(t.previous_run_ids for t in released) == [(runs[2],), (runs[3],)]
    new = studies.claim_slots(study.id)
    assert len(new) == 2 and all(store.get_run(r).resumed_from is None for r in new)  # no checkpoints: fresh runs


def test_a_released_child_with_a_checkpoint_resumes_from_it(store: Store) -> None:
    studies, study = _make(store, points=1, seeds=1, cap=1)
    (run_id,) = studies.claim_slots(study.id)
    store.transition(run_id, states.STARTING)
    store.add_checkpoint(run_id, step=2, path="/tmp/ckpt-2")
    store.request_stop(run_id)
    store.transition(run_id, states.STOPPED)
    studies.release_for_resume(study.id)
    (again,) = studies.claim_slots(study.id)
    assert store.get_run(again).resumed_from == run_id and store.get_run(again).attempt == 2

    # the second attempt is stopped again before it saved a checkpoint: the third still continues
    # from the first one's checkpoint, through the second (as any resumed run does)
    store.transition(again, states.STARTING)
    store.request_stop(again)
    store.transition(again, states.STOPPED)
    studies.release_for_resume(study.id)
    (third,) = studies.claim_slots(study.id)
    assert store.get_run(third).resumed_from == again and store.get_run(third).attempt == 3

def test_metric_summaries_give_final_best_and_count_from_stored_points(store: Store) -> None:
    studies, study = _make(store, points=1, seeds=2, cap=2)
    a, b = studies.claim_slots(study.id)
    for step, value in enumerate([0.1, 0.7, 0.4]):
        store.log_step(a, step, step, {"train/reward_mean": value, "agent/first/loss": 1.0 - value})
    store.log_step(b, 0, 0, {"train/reward_mean": 0.2})
    store.log_step(b, 1, 1, {"train/reward_mean": math.nan})
    found = {(s.run_id, s.key): s for s in studies.metric_summaries([a, b])}
    assert (found[a, "train/reward_mean"].final, found[a, "train/reward_mean"].best) == (0.4, 0.7)
    assert found[a, "train/reward_mean"].last_step == 2 and found[a, "train/reward_mean"].count == 3
    assert found[a, "agent/first/loss"].final == pytest.approx(0.6)
    assert (found[b, "train/reward_mean"].final, found[b, "train/reward_mean"].count) == (0.2, 1)  # NaN skipped
    assert set(studies.metric_summaries([a, b], keys=["agent/first/loss"])) == {found[a, "agent/first/loss"]}
    assert studies.metric_points([a, b], "train/reward_mean") == {a: [(0, 0.1), (1, 0.7), (2, 0.4)], b: [(0, 0.2)]}


def test_parallel_claims_never_exceed_the_cap(store_url: str) -> None:
    with Store(store_url) as store:
        studies, study = _make(store, points=4, seeds=3, cap=3)
    claimed: list[int] = []
    errors: list[BaseException] = []

    def claim() -> None:
        try:
            with Store(store_url) as own:
                claimed.extend(StudyStore(own).claim_slots(study.id))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(claimed) == 3 == len(set(claimed))


def test_deleting_refuses_runs_in_flight_and_the_experiment_takes_its_studies_along(store: Store) -> None:
    studies, study = _make(store, points=1, seeds=2, cap=1)
    (run_id,) = studies.claim_slots(study.id)
    with pytest.raises(RunActiveError, match="still has runs in flight"):
        studies.delete_study(study.id)
    store.request_stop(run_id)
    studies.delete_study(study.id)
    assert studies.find_study("lr") is None and store.get_run(run_id).status == states.CANCELLED
    _, again = _make(store, name="again")
    store.delete_experiment(again.experiment_id, force=True)
    assert studies.find_study("again") is None


def test_waiting_and_in_flight_count_every_study_in_one_statement(store: Store) -> None:
    """As the children's own states say: ``pending`` children wait, queued to stopping ones are in flight."""
    studies, study = _make(store, points=3, seeds=2, cap=3)
    _, idle = _make(store, name="idle", points=1, seeds=1)
    first, second, _ = studies.claim_slots(study.id)
    _finish(store, first)  # ended: neither waiting nor in flight
    store.transition(second, states.STARTING)
    counts = studies.waiting_and_in_flight([study.id, idle.id, 999])
    trials = studies.trials(study.id)
    assert counts[study.id] == (sum(t.status == PENDING for t in trials),
                                sum(t.status in states.ACTIVE_STATUSES for t in trials)) == (3, 2)
    assert counts == {study.id: (3, 2), idle.id: (1, 0)} and studies.waiting_and_in_flight([]) == {}
