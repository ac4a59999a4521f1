"""Studies in the database: :class:`StudyStore` works on a :class:`db.store.Store`'s engine, each
method one transaction returning frozen records of :mod:`db.study_records`.

A study's children are rows of ``study_trials``; a child gets a run (a normal ``queued`` run of the
study's experiment, tagged ``study:<name>``) only when :meth:`StudyStore.claim_slots` gives it one of the
study's ``max_concurrent`` slots. The claim locks the study row (``SELECT ... FOR UPDATE`` on
PostgreSQL; SQLite's write transactions already run one at a time), so schedulers in several
processes never put more children in flight than the cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from db import convert
from db.engine import StoreBase
from db.errors import DuplicateNameError, NotFoundError, RunActiveError
from db.models import CheckpointRow, MetricRow, RunRow, StudyRow, StudyTrialRow, utcnow
from db.states import ACTIVE_STATUSES, CANCELLED, LOST, STOPPED
from db.store import Store
from db.study_records import (
    ACTIVE,
    PENDING,
    STUDY_STATUSES,
    RunMetricSummary,
    Study,
    StudyTrial,
    TrialInput,
)

RESUMABLE = (STOPPED, CANCELLED, LOST)
"""Children in these states get a new run on resume-all (unless the study stopped them early)."""


def _study(row: StudyRow) -> Study:
    return Study(id=row.id, name=row.name, description=row.description or "", experiment_id=row.experiment_id,
                 spec=convert.json_config(row.spec), status=row.status, queue=row.queue,
                 max_concurrent=row.max_concurrent, created_at=row.created_at, updated_at=row.updated_at)


def _trial(row: StudyTrialRow, run: RunRow | None) -> StudyTrial:
    return StudyTrial(id=row.id, study_id=row.study_id, point=row.point, seed_index=row.seed_index, seed=row.seed,
                      params=convert.json_config(row.params), config=convert.json_config(row.config),
                      run_id=row.run_id, previous_run_ids=tuple(row.previous_run_ids or ()),
                      stop_reason=row.stop_reason, status=run.status if run is not None else PENDING,
                      step=run.step or 0 if run is not None else 0, error=run.error if run is not None else None)


def load(session: Session, study_id: int, *, lock: bool = False) -> StudyRow:
    query = select(StudyRow).where(StudyRow.id == study_id)
    row = session.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFoundError(f"no study with id {study_id}")
    return row


def _check_status(status: str) -> str:
    if status not in STUDY_STATUSES:
        raise ValueError(f"unknown study status {status!r}; use one of: {', '.join(STUDY_STATUSES)}")
    return status


def _in_flight(session: Session, study_id: int) -> int:
    return int(session.scalar(
        select(func.count()).select_from(StudyTrialRow).join(RunRow, RunRow.id == StudyTrialRow.run_id)
        .where(StudyTrialRow.study_id == study_id, RunRow.status.in_(ACTIVE_STATUSES))) or 0)


def _resumable_previous(session: Session, trial: StudyTrialRow) -> int | None:
    """The child's last run when a checkpoint lies along its attempts (that run, or one it was resumed
    from): the new attempt is resumed from it and continues from the newest, as any resumed run does."""
    if not trial.previous_run_ids:
        return None
    last = int(trial.previous_run_ids[-1])
    seen: set[int] = set()
    source: int | None = last
    while source is not None and source not in seen:  # a deleted run ends the chain (its rows cascade)
        seen.add(source)
        if session.scalar(select(CheckpointRow.id).where(CheckpointRow.run_id == source).limit(1)) is not None:
            return last
        source = session.scalar(select(RunRow.resumed_from).where(RunRow.id == source))
    return None


class StudyStore(StoreBase):
    """Studies and their children, on the database of ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    def create_study(self, name: str, spec: Mapping[str, Any], trials: Sequence[TrialInput], *, queue: str = "cpu",
                     max_concurrent: int = 1, description: str = "") -> Study:
        """Store an ``active`` study with its children (all waiting), in an experiment of its own named
        ``study: <name>``. ``name`` must be unique (else :class:`db.errors.DuplicateNameError`)."""
        with self._write() as session:
            name = (name or "").strip()
            if not name or len(name) > 200:
                raise ValueError("a study needs a name of 1 to 200 characters")
            if max_concurrent < 1:
                raise ValueError(f"max_concurrent must be at least 1 (runs of the study in flight at once), "
                                 f"got {max_concurrent}")
            if not trials:
                raise ValueError("a study needs at least one child (a point of its space with a seed)")
            if not isinstance(queue, str) or not queue.strip():
                raise ValueError("a study needs a queue name (the device its runs go to, e.g. 'cpu' or 'cuda:0')")
            existing = session.scalar(select(StudyRow.id).where(StudyRow.name == name))
            if existing is not None:
                raise DuplicateNameError(f"a study named {name!r} already exists (id {existing}); pick another name")
            experiment = self.store.within(session).get_or_create_experiment(
                f"study: {name}", description=description, tags=["study"], config=spec.get("base") or {})
            now = utcnow()
            row = StudyRow(name=name, description=description or "", experiment_id=experiment.id,
                           spec=convert.json_config(spec), status=ACTIVE, queue=queue.strip(),
                           max_concurrent=int(max_concurrent), created_at=now, updated_at=now)
            session.add(row)
            session.flush()
            session.add_all(StudyTrialRow(study_id=row.id, point=t.point, seed_index=t.seed_index, seed=t.seed,
                                          params=convert.json_config(t.params), config=convert.json_config(t.config),
                                          previous_run_ids=[]) for t in trials)
            session.flush()
            return _study(row)

    def get_study(self, study_id: int) -> Study:
        """The study with this id (else :class:`db.errors.NotFoundError`)."""
        with self._read() as session:
            return _study(load(session, study_id))

    def find_study(self, name: str) -> Study | None:
        """The study with exactly this name, or None."""
        with self._read() as session:
            row = session.scalar(select(StudyRow).where(StudyRow.name == name.strip()))
            return _study(row) if row is not None else None

    def list_studies(self, statuses: Iterable[str] | None = None, limit: int = 200) -> list[Study]:
        """Studies, newest first, optionally in some states."""
        with self._read() as session:
            query = select(StudyRow).order_by(StudyRow.id.desc()).limit(limit)
            if statuses is not None:
                query = query.where(StudyRow.status.in_([_check_status(s) for s in statuses]))
            return [_study(row) for row in session.scalars(query)]

    def trials(self, study_id: int) -> list[StudyTrial]:
        """The study's children by point, then seed, each with its run's state (``pending`` without one)."""
        with self._read() as session:
            load(session, study_id)
            query = (select(StudyTrialRow, RunRow).outerjoin(RunRow, RunRow.id == StudyTrialRow.run_id)
                     .where(StudyTrialRow.study_id == study_id)
                     .order_by(StudyTrialRow.point, StudyTrialRow.seed_index))
            return [_trial(trial, run) for trial, run in session.execute(query)]

    def waiting_and_in_flight(self, study_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
        """Per study of ``study_ids`` that has children: how many wait for a run (``pending``) and how many
        runs are in flight, in one statement (a live page asks for every study at each refresh)."""
        ids = list(study_ids)
        if not ids:
            return {}
        waiting = func.sum(case((RunRow.id.is_(None), 1), else_=0))
        in_flight = func.sum(case((RunRow.status.in_(ACTIVE_STATUSES), 1), else_=0))
        query = (select(StudyTrialRow.study_id, waiting, in_flight)
                 .outerjoin(RunRow, RunRow.id == StudyTrialRow.run_id)
                 .where(StudyTrialRow.study_id.in_(ids)).group_by(StudyTrialRow.study_id))
        with self._read() as session:
            return {study_id: (int(w or 0), int(f or 0)) for study_id, w, f in session.execute(query)}

    def trial_of_run(self, run_id: int) -> StudyTrial | None:
        """The study child that ``run_id`` executes, or None for a run of no study."""
        with self._read() as session:
            query = (select(StudyTrialRow, RunRow).join(RunRow, RunRow.id == StudyTrialRow.run_id)
                     .where(StudyTrialRow.run_id == run_id))
            found = session.execute(query).first()
            return _trial(*found) if found is not None else None

    def set_status(self, study_id: int, status: str) -> Study:
        """Set the study's state: ``active``, ``stopped`` or ``finished``."""
        with self._write() as session:
            row = load(session, study_id, lock=True)
            row.status = _check_status(status)
            row.updated_at = utcnow()
            session.flush()
            return _study(row)

    def set_max_concurrent(self, study_id: int, max_concurrent: int) -> Study:
        """Change how many of the study's runs may be in flight at once."""
        with self._write() as session:
            if max_concurrent < 1:
                raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
            row = load(session, study_id, lock=True)
            row.max_concurrent = int(max_concurrent)
            row.updated_at = utcnow()
            session.flush()
            return _study(row)

    def claim_slots(self, study_id: int) -> list[int]:
        """Give waiting children a ``queued`` run each, up to the free slots of an active study; returns
        the new run ids. Safe when several processes call it at once: the cap is never exceeded."""
        with self._write() as session:
            study = load(session, study_id, lock=True)
            if study.status != ACTIVE:
                return []
            free = study.max_concurrent - _in_flight(session, study_id)
            if free <= 0:
                return []
            waiting = session.scalars(
                select(StudyTrialRow).where(StudyTrialRow.study_id == study_id, StudyTrialRow.run_id.is_(None))
                .order_by(StudyTrialRow.seed_index, StudyTrialRow.point).limit(free)).all()
            runs = self.store.within(session)  # the runs are created under the study's row lock
            created = []
            for trial in waiting:
                resumed_from = _resumable_previous(session, trial)
                total = (trial.config.get("trainer") or {}).get("max_steps")
                run = runs.create_run(study.experiment_id, trial.config, study.queue, total_steps=total,
                                      resumed_from=resumed_from, device=None,
                                      tags=[f"study:{study.name}", f"point:{trial.point}"], notes="")
                trial.run_id = run.id
                created.append(run.id)
            session.flush()
            return created

    def stop_early(self, trial_id: int, reason: str) -> StudyTrial:
        """Record why the study stops this child early (the first reason is kept)."""
        with self._write() as session:
            row = session.get(StudyTrialRow, trial_id)
            if row is None:
                raise NotFoundError(f"no study child with id {trial_id}")
            if row.stop_reason is None:
                row.stop_reason = reason
            session.flush()
            return _trial(row, session.get(RunRow, row.run_id) if row.run_id is not None else None)

    def release_for_resume(self, study_id: int) -> int:
        """Resume-all in the database: the study becomes ``active``; children that ended stopped,
        cancelled or lost (not stopped early) wait for a slot again. Returns how many."""
        with self._write() as session:
            row = load(session, study_id, lock=True)
            query = (select(StudyTrialRow).join(RunRow, RunRow.id == StudyTrialRow.run_id)
                     .where(StudyTrialRow.study_id == study_id, RunRow.status.in_(RESUMABLE),
                            StudyTrialRow.stop_reason.is_(None)))
            released = 0
            for trial in session.scalars(query):
                assert trial.run_id is not None  # joined to its run above
                trial.previous_run_ids = [*(trial.previous_run_ids or ()), trial.run_id]
                trial.run_id = None
                released += 1
            row.status = ACTIVE
            row.updated_at = utcnow()
            session.flush()
            return released

    def delete_study(self, study_id: int, *, force: bool = False) -> None:
        """Delete the study and its children rows (its runs stay in its experiment). Refuses while runs
        are in flight unless ``force``."""
        with self._write() as session:
            row = load(session, study_id)
            if not force and _in_flight(session, study_id):
                raise RunActiveError(f"study {study_id} still has runs in flight; stop it first or pass force=True")
            session.delete(row)

    def metric_summaries(self, run_ids: Iterable[int], keys: Iterable[str] | None = None) -> list[RunMetricSummary]:
        """Per run and metric key: last step, final value, best value, number of points."""
        with self._read() as session:
            ids = sorted({int(i) for i in run_ids})
            if not ids:
                return []
            conditions = [MetricRow.run_id.in_(ids), MetricRow.value.is_not(None)]
            if keys is not None:
                conditions.append(MetricRow.key.in_(list(keys)))
            grouped = (select(MetricRow.run_id, MetricRow.key, func.max(MetricRow.step).label("last_step"),
                              func.max(MetricRow.value).label("best"), func.count().label("n"))
                       .where(*conditions).group_by(MetricRow.run_id, MetricRow.key).subquery())
            final = (select(MetricRow.run_id, MetricRow.key, func.max(MetricRow.value).label("final"))
                     .join(grouped, and_(grouped.c.run_id == MetricRow.run_id, grouped.c.key == MetricRow.key,
                                         grouped.c.last_step == MetricRow.step))
                     .where(MetricRow.value.is_not(None)).group_by(MetricRow.run_id, MetricRow.key).subquery())
            query = (select(grouped.c.run_id, grouped.c.key, grouped.c.last_step, final.c.final, grouped.c.best, grouped.c.n)
                     .join(final, and_(final.c.run_id == grouped.c.run_id, final.c.key == grouped.c.key))
                     .order_by(grouped.c.run_id, grouped.c.key))
            return [RunMetricSummary(run_id=r, key=k, last_step=int(s), final=f, best=b, count=int(n))
                    for r, k, s, f, b, n in session.execute(query)]

    def metric_points(self, run_ids: Iterable[int], key: str) -> dict[int, list[tuple[int, float]]]:
        """All stored ``(step, value)`` points of ``key`` for each run, by step."""
        with self._read() as session:
            ids = sorted({int(i) for i in run_ids})
            found: dict[int, list[tuple[int, float]]] = {i: [] for i in ids}
            if not ids:
                return found
            query = (select(MetricRow.run_id, MetricRow.step, MetricRow.value)
                     .where(MetricRow.run_id.in_(ids), MetricRow.key == key, MetricRow.value.is_not(None))
                     .order_by(MetricRow.run_id, MetricRow.step, MetricRow.id))
            for run_id, step, value in session.execute(query):
                found[run_id].append((int(step), float(cast(float, value))))  # not None: filtered above
            return found
