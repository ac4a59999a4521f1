"""The store: every read and write of CoopLab's database goes through :class:`Store`.

``Store(url)`` takes any SQLAlchemy URL (``sqlite:///path.db`` by default, ``postgresql://...`` for
many machines). Each method is one transaction and returns frozen dataclasses from
:mod:`db.records`, never ORM objects, so callers never see a session (:meth:`Store.within` runs methods
inside a transaction the caller holds, to make several operations one). Run states change only through
:meth:`Store.transition` (and :meth:`Store.request_stop` / :meth:`Store.reap_lost`), which update the
row with a compare-and-set ``UPDATE ... WHERE status IN (...)``: when two processes race to move the
same run, exactly one wins and the other gets :class:`InvalidTransition`.

The schema is created by alembic migrations: call :func:`db.migrate.upgrade` (or pass
``migrate=True``) once when a process starts.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Engine, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from db.clock import server_now
from db.engine import make_engine
from db.errors import DuplicateNameError, NotFoundError, RunActiveError
from db.models import MetaRow
from db.ops_environments import EnvironmentOps
from db.ops_experiments import ExperimentOps
from db.ops_lineage import LineageOps
from db.ops_metrics import MetricOps
from db.ops_run_table import RunTableOps
from db.ops_runs import RunOps
from db.ops_saved_views import SavedViewOps
from db.ops_store_outages import StoreOutageOps
from db.ops_transcripts import TranscriptOps
from db.ops_workers import WorkerOps
from db.states import InvalidTransition

DATABASE_ID = "database_id"
"""The key of the database's random id in the ``meta`` table."""

__all__ = ["Store", "InvalidTransition", "NotFoundError", "DuplicateNameError", "RunActiveError"]


class Store(ExperimentOps, RunOps, RunTableOps, LineageOps, MetricOps, TranscriptOps, WorkerOps, StoreOutageOps,
            EnvironmentOps, SavedViewOps):
    """Experiments, runs, metrics, transcripts, checkpoints and workers in one database.

    Each operation is declared once, in the part of the store that holds its table's rows:
    :class:`~db.ops_experiments.ExperimentOps`, :class:`~db.ops_runs.RunOps` (runs, states,
    checkpoints; it extends :class:`~db.run_writes.RunWrites`, what a submit writes, on Core: getting or
    creating an experiment, creating a run, recording its execution details), :class:`~db.ops_run_table.RunTableOps` (the runs table, display names), :class:`~db.ops_lineage.LineageOps`, :class:`~db.ops_metrics.MetricOps`,
    :class:`~db.ops_transcripts.TranscriptOps`, :class:`~db.ops_workers.WorkerOps`,
    :class:`~db.ops_store_outages.StoreOutageOps`, :class:`~db.ops_environments.EnvironmentOps` and
    :class:`~db.ops_saved_views.SavedViewOps` (what a dashboard user chose to see). Each method
    opens its own transaction (:class:`db.engine.StoreBase`).

    Safe to share between threads of one process (each call takes its own connection from the pool);
    each process should create its own ``Store``.
    """

    def __init__(self, url: str, *, migrate: bool = False, echo: bool = False, engine: Engine | None = None) -> None:
        """Connect to ``url`` (through ``engine`` when given: one made by :func:`db.engine.make_engine` for
        that URL); with ``migrate=True`` also bring the schema up to date first."""
        self.url = url
        self.engine = engine if engine is not None else make_engine(url, echo=echo)
        if migrate:
            from db.migrate import upgrade_engine

            upgrade_engine(self.engine)

    @property
    def dialect(self) -> str:
        """``"sqlite"``, ``"postgresql"``, ...: the database kind behind the URL."""
        return make_url(self.url).get_backend_name()

    def close(self) -> None:
        """Release pooled connections (the store cannot be used afterwards)."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- database

    def server_now(self) -> datetime:
        """The database server's current time (timezone-aware UTC): the clock every liveness time is
        stamped with (:mod:`db.clock`), so compare them with this, never with this process's clock."""
        with self._read() as session:
            return server_now(session)

    def database_id(self) -> str:
        """This database's random id (given when its schema was created): what a data directory
        records to know which database owns it. A database without one yet gets one here (read
        first; when two processes create it at once, both return the one stored first)."""
        with self._read() as session:
            found = session.scalar(select(MetaRow.value).where(MetaRow.key == DATABASE_ID))
        if found:
            return found
        with self._write() as session:
            value = session.scalar(select(MetaRow.value).where(MetaRow.key == DATABASE_ID))
            if value:
                return value
            try:
                with session.begin_nested():
                    session.add(MetaRow(key=DATABASE_ID, value=uuid.uuid4().hex))
            except IntegrityError:  # another process created it first
                pass
            return session.scalar(select(MetaRow.value).where(MetaRow.key == DATABASE_ID)) or ""
