"""Studies on the workers: create, schedule (top up to the cap, early stopping), stop-all, resume-all.

The scheduler is :func:`schedule_study`, a pass computed from the database alone, so it can run
anywhere and any number of times: children get runs only through
:meth:`db.study_store.StudyStore.claim_slots` (a compare-and-set under the study's row lock, never
more than ``max_concurrent`` in flight), and those runs go to the broker through the normal send path
(:func:`jobs.client.resend_run`). It runs

- right after each child run ends, in that run's job process (:func:`after_run`, called by the task),
  so a finished child is replaced at once;
- on every maintenance pass (:func:`schedule_studies`, called by :func:`jobs.maintenance.run_maintenance`
  on each worker's timer and by ``cooplab up``), which also applies early stopping to running
  children and tops up after runs that ended without their job reporting (a worker that died: the
  reaper marks the run ``lost``, and its slot frees up);
- when a study is created or resumed, and by ``cooplab study status``.

Nothing is held in memory between passes, so a worker restart loses nothing: the next pass anywhere
sees the same truth. A failed child is just a final child; the study goes on until every child ended,
then it is ``finished``. A send that fails leaves the run ``queued`` (the broker is down); the
maintenance pass re-sends queued runs the broker does not hold (:mod:`jobs.reconcile`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from db import states
from db.store import Store
from db.study_records import ACTIVE, FINISHED, PENDING, STOPPED, Study, StudyTrial
from db.study_store import StudyStore
from jobs.client import BrokerUnavailable, get_store, resend_run, stop_run
from jobs.settings import Settings, get_settings
from jobs.study_limits import study_limits
from jobs.study_rules import median_rule
from jobs.study_spec import StudySpec, parse_study_spec, study_trials

log = logging.getLogger(__name__)

PEERS = (states.SUCCEEDED, states.STOPPED)
"""Children whose curves a running child is compared with by the median rule: those that completed
(or were stopped, by the rule or by hand), as Vizier's and Optuna's median rules do; comparing running
children with each other would stop the lower half of every wave."""


@dataclass(frozen=True)
class ScheduleReport:
    """What one scheduling pass of a study did."""

    study_id: int
    queued: tuple[int, ...] = ()
    stopped_early: tuple[int, ...] = ()
    finished: bool = False


def _studies(settings: Settings, store: Store | None) -> StudyStore:
    return StudyStore(store or get_store(settings))


def find_study(ref: str | int, *, settings: Settings | None = None, store: Store | None = None) -> Study:
    """A study by id or by name; ``LookupError`` naming what was looked for when there is none."""
    studies = _studies(settings or get_settings(), store)
    found = studies.find_study(str(ref))
    if found is None and str(ref).isdigit():
        from db.errors import NotFoundError

        try:
            found = studies.get_study(int(ref))
        except NotFoundError:
            found = None
    if found is None:
        raise LookupError(f"no study named or numbered {ref!r}; `cooplab study list` shows them")
    return found


def create_study(spec: StudySpec | Mapping[str, Any], *, settings: Settings | None = None,
                 schedule: bool = True) -> Study:
    """Validate the study, its size within the operator's limits (``COOPLAB_MAX_STUDY_*``,
    :mod:`jobs.study_limits`, counted before anything is built) and every config it generates (the
    run-config schema and the pre-flight checks, :func:`jobs.preflight.check_run_config`), store it with all its children waiting, and
    (``schedule``) queue the first ``max_concurrent`` of them. Raises
    :class:`jobs.study_space.StudySpaceError` naming the point and field before anything is stored."""
    from jobs.celery_app import validate_device
    from jobs.preflight import check_run_config

    settings = settings or get_settings()
    spec = spec if isinstance(spec, StudySpec) else parse_study_spec(spec)
    validate_device(spec.device)
    inputs = study_trials(spec, validate=lambda config: check_run_config(config, settings=settings),
                          limits=study_limits(settings))  # COOPLAB_MAX_STUDY_*, counted before expanding
    study = _studies(settings, None).create_study(spec.name, spec.model_dump(mode="json"), inputs, queue=spec.device,
                                                  max_concurrent=spec.max_concurrent, description=spec.description)
    log.info("study %s (%s): %d children, at most %d at once", study.id, study.name, len(inputs), spec.max_concurrent)
    if schedule:
        schedule_study(study.id, settings=settings)
    return study


def schedule_study(study_id: int, *, settings: Settings | None = None, store: Store | None = None) -> ScheduleReport:
    """One scheduling pass of a study: early stopping of running children, then top up to the cap,
    then ``finished`` once every child ended."""
    settings = settings or get_settings()
    studies = _studies(settings, store)
    study = studies.get_study(study_id)
    if study.status != ACTIVE:
        return ScheduleReport(study_id)
    trials = studies.trials(study_id)  # read once: the steps below change only what they report
    stopped = _early_stopping(studies, study, trials, settings)
    queued = []
    for run_id in _claim(studies, study, trials):
        try:
            resend_run(run_id, settings=settings, store=studies.store)
        except BrokerUnavailable as exc:  # it stays queued; the maintenance pass re-sends it
            log.warning("study %s: run %s stays queued: %s", study.name, run_id, exc)
            break
        queued.append(run_id)
    # a claimed child is queued and an early-stopped one still stopping: neither study is finished
    finished = not queued and not stopped and all(t.status in states.TERMINAL_STATUSES for t in trials)
    if finished:
        studies.set_status(study_id, FINISHED)
        log.info("study %s finished: %s", study.name, _count(t.status for t in trials))
    return ScheduleReport(study_id, queued=tuple(queued), stopped_early=tuple(stopped), finished=finished)


def _claim(studies: StudyStore, study: Study, trials: Sequence[StudyTrial]) -> list[int]:
    """Claim free slots, taking the write lock only when ``trials`` (the pass's read) show a waiting
    child and a free slot (a watched study is scheduled every few seconds)."""
    waiting = any(t.status == PENDING for t in trials)
    in_flight = sum(t.status in states.ACTIVE_STATUSES for t in trials)
    return studies.claim_slots(study.id) if waiting and in_flight < study.max_concurrent else []


def _count(statuses: Any) -> str:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _early_stopping(studies: StudyStore, study: Study, trials: Sequence[StudyTrial],
                    settings: Settings) -> list[int]:
    """Stop the running children the study's rule (the median rule) finds clearly worse; returns their runs."""
    rule = study.spec.get("early_stopping")
    if not rule:
        return []
    trials = [t for t in trials if t.run_id is not None and t.status != PENDING]
    running = [t for t in trials if t.status == states.RUNNING and t.stop_reason is None]
    if not running:
        return []
    curves = studies.metric_points([t.run_id for t in trials], rule["metric"])
    others = [curves[t.run_id] for t in trials if t.status in PEERS]
    stopped = []
    for trial in running:
        verdict = median_rule(curves[trial.run_id], others, metric=rule["metric"], min_steps=int(rule["min_steps"]),
                              min_trials=int(rule["min_trials"]))
        if verdict.stop:
            studies.stop_early(trial.id, verdict.reason)
            stop_run(trial.run_id, settings=settings, store=studies.store)
            studies.store.set_run_notes(trial.run_id, notes=f"stopped early by study {study.name}: {verdict.reason}")
            log.info("study %s: run %s stopped early: %s", study.name, trial.run_id, verdict.reason)
            stopped.append(trial.run_id)
    return stopped


def schedule_studies(*, store: Store, settings: Settings | None = None) -> list[ScheduleReport]:
    """A scheduling pass of every active study (the maintenance pass calls it); one study's error is
    logged and does not stop the others."""
    settings = settings or get_settings()
    reports = []
    if store is None:
        raise ValueError("schedule_studies needs the caller's store (a process that forks keeps no shared one)")
    for study in _studies(settings, store).list_studies(statuses=[ACTIVE]):
        try:
            reports.append(schedule_study(study.id, settings=settings, store=store))
        except Exception:
            log.warning("scheduling study %s failed", study.name, exc_info=True)
    return reports


def after_run(run_id: int, *, settings: Settings | None = None) -> ScheduleReport | None:
    """When a run ended: if it is a study's child, schedule that study (its slot is free now)."""
    settings = settings or get_settings()
    trial = _studies(settings, None).trial_of_run(run_id)
    if trial is None:
        return None
    return schedule_study(trial.study_id, settings=settings)


def stop_study(study_id: int, *, settings: Settings | None = None) -> int:
    """Stop-all: the study queues nothing more; its queued children are cancelled and its running ones
    asked to stop (checkpoint, then ``stopped``). Returns how many runs were asked."""
    settings = settings or get_settings()
    studies = _studies(settings, None)
    studies.set_status(study_id, STOPPED)
    asked = 0
    for trial in studies.trials(study_id):
        if trial.run_id is not None and trial.status in states.ACTIVE_STATUSES:
            stop_run(trial.run_id, settings=settings, store=studies.store)
            asked += 1
    return asked


def resume_study(study_id: int, *, settings: Settings | None = None) -> int:
    """Resume-all: the study is active again; children that ended stopped, cancelled or lost (not
    stopped early by the study) wait again, a child with a checkpoint continuing from it; then a
    scheduling pass. Returns how many children were released."""
    settings = settings or get_settings()
    released = _studies(settings, None).release_for_resume(study_id)
    schedule_study(study_id, settings=settings)
    return released
