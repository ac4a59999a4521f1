"""Runs, their states and checkpoints: :class:`RunOps`, the part of :class:`db.store.Store` that reads and
writes them.

State changes are compare-and-set: ``UPDATE runs SET status=:to WHERE id=:id AND status IN
(:allowed_sources)``. Whoever's UPDATE matches the row wins; a loser sees zero rows changed and gets
:class:`InvalidTransition` naming the state the run is really in.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Executable,
    Select,
    Text,
    and_,
    cast,
    delete,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from db import convert
from db.clock import db_now, server_now
from db.errors import NotFoundError, RunActiveError, RunSettledError
from db.models import CheckpointRow, ExperimentRow, RunRow, UTCDateTime, WorkerRow, utcnow
from db.ops_experiments import tag_pattern
from db.records import Checkpoint, Run, RunRate
from db.run_writes import RunWrites
from db.states import (
    ACTIVE_STATUSES,
    ALL_STATUSES,
    CANCELLED,
    LIVE_STATUSES,
    LOST,
    QUEUED,
    RUNNING,
    STARTING,
    STOPPED,
    STOPPING,
    TERMINAL_STATUSES,
    InvalidTransition,
    check_status,
    sources_of,
)

MAX_ERROR_CHARS = 20_000


def carries_tag(tag: str) -> ColumnElement[bool]:
    """A run carries ``tag`` when it has the tag or its experiment has it (an experiment's tags, such as
    ``lr-sweep``, then select its runs without tagging each one)."""
    pattern = tag_pattern(tag)
    tagged_experiments = select(ExperimentRow.id).where(cast(ExperimentRow.tags, Text).like(pattern, escape="\\"))
    return or_(cast(RunRow.tags, Text).like(pattern, escape="\\"), RunRow.experiment_id.in_(tagged_experiments))


def filter_runs(query: Select[Any], experiment_id: int | None = None, statuses: Iterable[str] | None = None,
                tag: str | None = None) -> Select[Any]:
    """``query`` narrowed to the runs of one experiment, in some states and carrying a tag (its own or
    its experiment's, :func:`carries_tag`), each optional."""
    if experiment_id is not None:
        query = query.where(RunRow.experiment_id == experiment_id)
    if statuses is not None:
        wanted = [check_status(s) for s in ([statuses] if isinstance(statuses, str) else statuses)]
        query = query.where(RunRow.status.in_(wanted))
    if tag:
        query = query.where(carries_tag(tag))
    return query


def load(session: Session, run_id: int) -> RunRow:
    row = session.get(RunRow, run_id)
    if row is None:
        raise NotFoundError(f"no run with id {run_id}")
    return row


def _dml(session: Session, statement: Executable) -> CursorResult[Any]:
    """Run an UPDATE or DELETE; its result says how many rows it changed (``rowcount``)."""
    result = session.execute(statement)
    assert isinstance(result, CursorResult)  # what SQLAlchemy returns for a data-changing statement
    return result


def ts(moment: datetime) -> Any:
    """``moment`` as a SQL value of the UTC column type (inside expressions like ``coalesce``)."""
    return literal(moment, UTCDateTime())


def _refuse(session: Session, run_id: int, to: str, expected_from: str | None) -> InvalidTransition:
    current = session.scalar(select(RunRow.status).where(RunRow.id == run_id))
    if current is None:
        raise NotFoundError(f"no run with id {run_id}")
    return InvalidTransition(run_id, current, to, expected_from)


def compute_rate(step: int, total_steps: int | None, first_step: int | None, first_at: datetime | None,
                 last_at: datetime | None) -> tuple[float | None, float | None]:
    """Steps per second between the first and the last logged step, and seconds left at that rate.

    Pure: ``(None, None)`` until two different steps were logged at two different times.
    """
    if first_step is None or first_at is None or last_at is None or step <= first_step:
        return None, None
    elapsed = (last_at - first_at).total_seconds()
    if elapsed <= 0:
        return None, None
    rate = (step - first_step) / elapsed
    eta = max(0.0, (total_steps - step) / rate) if total_steps is not None else None
    return rate, eta


class RunOps(RunWrites):
    """Runs, their states and checkpoints: the operations of :class:`db.store.Store` on them, each one
    transaction."""

    # create_run and update_run: inherited from db.run_writes.RunWrites (on Core; cooplab submit runs them
    # without the ORM)

    def get_run(self, run_id: int) -> Run:
        """The run with this id (else :class:`NotFoundError`)."""
        with self._read() as session:
            return convert.run(load(session, run_id))

    def list_runs(self, experiment_id: int | None = None, statuses: Iterable[str] | None = None,
                  limit: int = 100, *, offset: int = 0, tag: str | None = None) -> list[Run]:
        """Runs, newest first, optionally of one experiment, in some states, or carrying a tag."""
        with self._read() as session:
            query = select(RunRow).order_by(RunRow.id.desc()).limit(limit).offset(offset)
            return [convert.run(row) for row in session.scalars(filter_runs(query, experiment_id, statuses, tag))]

    def transition(self, run_id: int, to: str, *, error: str | None = None,
                   expected_from: str | None = None, worker: str | None = None) -> Run:
        """Move a run to state ``to`` if the state machine allows it from where the run is (and, with
        ``expected_from``, only if the run is in exactly that state). Sets ``started_at`` on
        ``running``, ``finished_at`` on a final state, ``error`` and ``worker`` when given.
        Raises :class:`InvalidTransition` (with ``.current``) when refused."""
        with self._write() as session:
            check_status(to)
            sources = sources_of(to)
            if expected_from is not None:
                check_status(expected_from)
                sources = sources & {expected_from}
            at = db_now()
            values: dict[str, Any] = {"status": to}
            if error is not None:
                values["error"] = error[-MAX_ERROR_CHARS:]
            if worker is not None:
                values["worker"] = worker
            if to in (STARTING, RUNNING):
                values["heartbeat_at"] = at
            if to == RUNNING:
                values["started_at"] = func.coalesce(RunRow.started_at, at)
            if to == STOPPING:
                values["stop_requested"] = True
                values["stop_requested_at"] = func.coalesce(RunRow.stop_requested_at, at)
            if to in TERMINAL_STATUSES:
                values["finished_at"] = at
            result = _dml(session,
                update(RunRow).where(RunRow.id == run_id, RunRow.status.in_(sources)).values(**values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:
                raise _refuse(session, run_id, to, expected_from)
            session.expire_all()
            return convert.run(load(session, run_id))

    def request_stop(self, run_id: int) -> Run:
        """Ask a run to stop: sets the stop flag; a queued run becomes ``cancelled``, a starting or
        running one ``stopping``; a run already final or stopping is left as it is."""
        with self._write() as session:
            now = db_now()  # the grace period counts on the server's clock, whoever enforces it
            row = load(session, run_id)
            if row.status == QUEUED:
                changed = _dml(session,
                    update(RunRow).where(RunRow.id == run_id, RunRow.status == QUEUED)
                    .values(status=CANCELLED, stop_requested=True, stop_requested_at=now, finished_at=now)
                    .execution_options(synchronize_session=False)).rowcount
            else:
                changed = 0
            if not changed:
                # Not queued (or no longer): flag it, and move a starting/running run to stopping.
                session.execute(
                    update(RunRow).where(RunRow.id == run_id, RunRow.status.in_((STARTING, RUNNING)))
                    .values(status=STOPPING).execution_options(synchronize_session=False))
                session.execute(
                    update(RunRow).where(RunRow.id == run_id, RunRow.status.in_(ACTIVE_STATUSES),
                                         RunRow.stop_requested.is_(False))
                    .values(stop_requested=True, stop_requested_at=now).execution_options(synchronize_session=False))
            session.expire_all()
            return convert.run(load(session, run_id))

    def note_storing(self, run_id: int) -> bool:
        """Record (on the server's clock) that the run's job just stored a file of its artifacts: a
        ``stopping`` run's grace period counts from its stop request or this, whichever is later
        (:class:`jobs.maintenance.StopEnforcer`). False when the run is already settled."""
        with self._write() as session:
            changed = _dml(session,
                update(RunRow).where(RunRow.id == run_id, RunRow.status.in_(LIVE_STATUSES)).values(storing_at=db_now())
                .execution_options(synchronize_session=False)).rowcount
            return changed == 1

    def stop_requested(self, run_id: int) -> bool:
        """True once someone asked this run to stop."""
        with self._read() as session:
            flag = session.scalar(select(RunRow.stop_requested).where(RunRow.id == run_id))
            if flag is None:
                raise NotFoundError(f"no run with id {run_id}")
            return bool(flag)

    def heartbeat(self, run_id: int, worker: str | None = None, *, live_only: bool = False) -> bool:
        """Refresh the run's heartbeat (and the worker's ``last_seen`` when ``worker`` names a known
        worker); returns the stop flag so a sink needs one round trip. With ``live_only`` (a job's
        beat) a run that is not starting, running or stopping is left as it is and
        :class:`RunSettledError` raised."""
        with self._write() as session:
            at = db_now()
            values: dict[str, Any] = {"heartbeat_at": at}
            if worker is not None:
                values["worker"] = worker
            # Only a live run takes its job's heartbeat (in the same statement): a settled run's
            # heartbeat_at stays where its end left it, and the job learns that it must stop.
            where = [RunRow.id == run_id] + ([RunRow.status.in_(LIVE_STATUSES)] if live_only else [])
            stop = session.execute(update(RunRow).where(*where).values(**values)
                                   .returning(RunRow.stop_requested)
                                   .execution_options(synchronize_session=False)).scalar_one_or_none()
            if stop is None:
                status = session.scalar(select(RunRow.status).where(RunRow.id == run_id))
                if status is None:
                    raise NotFoundError(f"no run with id {run_id}")
                raise RunSettledError(run_id, status)
            if worker is not None:
                session.execute(update(WorkerRow).where(WorkerRow.name == worker).values(last_seen=at, online=True)
                                .execution_options(synchronize_session=False))
            return bool(stop)

    def set_run_notes(self, run_id: int, *, tags: Iterable[str] | None = None, notes: str | None = None) -> Run:
        """Replace the run's tags and/or notes (None leaves one as it is)."""
        with self._write() as session:
            row = load(session, run_id)
            if tags is not None:
                row.tags = convert.clean_tags(tags)
            if notes is not None:
                row.notes = notes
            session.flush()
            return convert.run(row)

    def delete_run(self, run_id: int, *, force: bool = False) -> None:
        """Delete a run with its metrics, episodes and checkpoint rows (files on disk stay). Refuses
        (:class:`RunActiveError`) while the run is active, unless ``force``."""
        with self._write() as session:
            row = load(session, run_id)
            if row.status in ACTIVE_STATUSES and not force:
                raise RunActiveError(f"run {run_id} is {row.status}; stop or cancel it before deleting, or pass force=True")
            session.execute(delete(RunRow).where(RunRow.id == run_id).execution_options(synchronize_session=False))
            session.expunge(row)

    def run_tags(self) -> list[str]:
        """Every tag some run carries (its own, or its experiment's: :func:`carries_tag`), sorted."""
        with self._read() as session:
            found: set[str] = set()
            for tags in session.scalars(select(RunRow.tags).where(cast(RunRow.tags, Text) != "[]")):
                found.update(str(t) for t in tags or ())
            with_runs = select(RunRow.experiment_id)
            for tags in session.scalars(select(ExperimentRow.tags).where(cast(ExperimentRow.tags, Text) != "[]",
                                                                          ExperimentRow.id.in_(with_runs))):
                found.update(str(t) for t in tags or ())
            return sorted(found)

    def run_counts_by_status(self, experiment_id: int | None = None, *, tag: str | None = None) -> dict[str, int]:
        """How many runs are in each state (every state is a key, zero included), optionally of one
        experiment or carrying a tag (the filters of :meth:`list_runs`)."""
        with self._read() as session:
            query = select(RunRow.status, func.count()).group_by(RunRow.status)
            if experiment_id is not None:
                query = query.where(RunRow.experiment_id == experiment_id)
            if tag:
                query = query.where(carries_tag(tag))
            counts = dict.fromkeys(ALL_STATUSES, 0)
            for status, count in session.execute(query):
                counts[status] = int(count)
            return counts

    def run_rate(self, run_id: int) -> RunRate:
        """Step rate and ETA inputs of a run, from its first and last logged steps."""
        with self._read() as session:
            row = load(session, run_id)
            rate, eta = compute_rate(row.step, row.total_steps, row.first_step, row.first_step_at, row.last_step_at)
            return RunRate(run_id=run_id, step=row.step, total_steps=row.total_steps, first_step=row.first_step,
                           first_step_at=row.first_step_at, last_step_at=row.last_step_at, steps_per_s=rate, eta_s=eta)

    def reap_lost(self, timeout_s: float, now: datetime | None = None, *, lock_wait_s: float | None = None,
                  spare: Iterable[int] = ()) -> list[int]:
        """Settle runs whose worker stopped sending heartbeats for ``timeout_s`` seconds: a
        ``stopping`` run that was asked to stop becomes ``stopped``, any other starting/running/
        stopping run ``lost``. Returns the ids it changed. ``now`` defaults to the database server's time.
        ``lock_wait_s`` bounds the wait for the write lock (a reader's look must not hang behind a hung
        writer; it raises the database's "locked" error instead, and the next look tries again).
        Runs in ``spare`` are left alone (their job is known to be alive by other means)."""
        with self._write(lock_wait_s=lock_wait_s) as session:
            if timeout_s <= 0:
                raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
            now = now or server_now(session)  # heartbeats were stamped with the server's clock too
            cutoff = now - timedelta(seconds=timeout_s)
            # A run that never sent a heartbeat counts from when it was created.
            stale = func.coalesce(RunRow.heartbeat_at, RunRow.created_at) < ts(cutoff)
            # Rows another transaction holds locked are passed by, not waited for (PostgreSQL; SQLite has one
            # writer at a time): a job hung inside a write transaction must not hang its reaper. The server ends
            # that transaction (db.engine.WRITE_IDLE_TIMEOUT_S), and a later pass reaps the run.
            candidates = session.execute(
                select(RunRow.id, RunRow.status, RunRow.stop_requested).where(RunRow.status.in_(LIVE_STATUSES), stale,
                                                                              RunRow.id.not_in([int(i) for i in spare]))
                .with_for_update(skip_locked=True)
            ).all()
            changed: list[int] = []
            for run_id, status, asked in candidates:
                to = STOPPED if status == STOPPING and asked else LOST
                error = None if to == STOPPED else f"no heartbeat for more than {timeout_s:g} s: the worker died or hung"
                values: dict[str, Any] = {"status": to, "finished_at": now}
                if error is not None:
                    values["error"] = func.coalesce(RunRow.error, error)
                # Compare-and-set on the state we saw and on staleness, so a run that just woke up is spared.
                result = _dml(session,
                    update(RunRow).where(and_(RunRow.id == run_id, RunRow.status == status, stale)).values(**values)
                    .execution_options(synchronize_session=False))
                if result.rowcount == 1:
                    changed.append(run_id)
            if changed:
                session.execute(update(WorkerRow).where(WorkerRow.current_run_id.in_(changed))
                                .values(current_run_id=None).execution_options(synchronize_session=False))
            return changed

    def lost_runs_not_retried(self, *, config_mentions: str | None = None, limit: int = 1000) -> list[Run]:
        """``lost`` runs nobody asked to stop that the retry policy has not retried yet, newest first;
        with ``config_mentions`` only those whose stored config's JSON text holds that key (a quick
        filter: the caller still reads the config)."""
        with self._read() as session:
            query = (select(RunRow).where(RunRow.status == LOST, RunRow.retried_as.is_(None),
                                          RunRow.stop_requested.is_not(True))
                     .order_by(RunRow.id.desc()).limit(limit))
            if config_mentions:
                query = query.where(cast(RunRow.config, Text).like(f'%"{config_mentions}"%'))
            return [convert.run(row) for row in session.scalars(query)]

    def queue_retry(self, run_id: int, note: str) -> Run | None:
        """The retry policy's next attempt of lost run ``run_id``, in one transaction: a ``queued`` run with
        its config, queue, tags and total steps, resuming it (``resumed_from``, ``attempt`` one more), with
        ``note`` as its notes; and the lost run's ``retried_as`` set to the new run's id. The mark is a
        compare-and-set (``UPDATE runs SET retried_as ... WHERE id = :id AND status = 'lost' AND retried_as
        IS NULL``, the row locked until the transaction ends): when several processes settle the run and
        call this at once, exactly one creates the attempt and the others get None, as does a call for a
        run that is not ``lost`` or was retried already. The new run is not sent to the broker here."""
        with self._write() as session:
            claimed = _dml(session,
                update(RunRow).where(RunRow.id == run_id, RunRow.status == LOST, RunRow.retried_as.is_(None))
                .values(retried_as=0).execution_options(synchronize_session=False)).rowcount
            if claimed != 1:
                load(session, run_id)  # NotFoundError for an unknown run
                return None
            lost = load(session, run_id)
            new = self.within(session).create_run(lost.experiment_id, lost.config, lost.queue,
                                                  total_steps=lost.total_steps, resumed_from=run_id,
                                                  tags=lost.tags or (), notes=note)
            session.execute(update(RunRow).where(RunRow.id == run_id).values(retried_as=new.id)
                            .execution_options(synchronize_session=False))
            return new

    # ------------------------------------------------------------------------------ checkpoints

    def add_checkpoint(self, run_id: int, step: int, path: str) -> Checkpoint:
        """Record a checkpoint written at ``step`` into folder/file ``path``."""
        with self._write() as session:
            load(session, run_id)
            if step < 0:
                raise ValueError(f"checkpoint step must be >= 0, got {step}")
            row = CheckpointRow(run_id=run_id, step=step, path=str(path), created_at=utcnow())
            session.add(row)
            session.flush()
            return convert.checkpoint(row)

    def set_checkpoint_artifact(self, run_id: int, checkpoint_id: int, url: str) -> bool:
        """Record ``url``, the artifact store copy of checkpoint ``checkpoint_id`` of ``run_id``, once its
        upload completed and was checked; False when the row is gone (the checkpoint was pruned)."""
        with self._write() as session:
            if not str(url).strip():
                raise ValueError("a checkpoint's artifact URL may not be empty")
            result = _dml(session, update(CheckpointRow)
                          .where(CheckpointRow.run_id == run_id, CheckpointRow.id == int(checkpoint_id))
                          .values(artifact_url=str(url)).execution_options(synchronize_session=False))
            return result.rowcount == 1

    def list_checkpoints(self, run_id: int) -> list[Checkpoint]:
        """A run's checkpoints by ascending step."""
        with self._read() as session:
            query = select(CheckpointRow).where(CheckpointRow.run_id == run_id).order_by(CheckpointRow.step,
                                                                                          CheckpointRow.id)
            return [convert.checkpoint(row) for row in session.scalars(query)]

    def latest_checkpoint(self, run_id: int) -> Checkpoint | None:
        """The checkpoint with the highest step (latest recorded on ties), or None."""
        with self._read() as session:
            query = (select(CheckpointRow).where(CheckpointRow.run_id == run_id)
                     .order_by(CheckpointRow.step.desc(), CheckpointRow.id.desc()).limit(1))
            row = session.scalar(query)
            return convert.checkpoint(row) if row is not None else None

    def delete_checkpoints(self, run_id: int, checkpoint_ids: Iterable[int]) -> int:
        """Forget checkpoint rows of ``run_id`` (e.g. folders pruned from disk); returns how many went."""
        with self._write() as session:
            ids = [int(i) for i in checkpoint_ids]
            if not ids:
                return 0
            return _dml(session, delete(CheckpointRow).where(CheckpointRow.run_id == run_id, CheckpointRow.id.in_(ids))
                        .execution_options(synchronize_session=False)).rowcount
