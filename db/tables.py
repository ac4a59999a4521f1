"""The tables a submit writes (``experiments``, ``runs``), declared with SQLAlchemy Core only.

:mod:`db.models` maps its ORM classes onto these same ``Table`` objects (``__table__``) and declares
every other table itself, in this module's :data:`metadata`; the operations a submit makes
(:mod:`db.run_writes`) work on them without the ORM, so ``cooplab submit`` never imports
``sqlalchemy.orm`` or the other tables' classes.

Times are stored as naive UTC (:class:`UTCDateTime`) so SQLite and PostgreSQL compare them the same
way; they come back timezone-aware. A column's nullability is what the ORM annotation said
(``Mapped[int]``: NOT NULL, ``Mapped[int | None]``: NULL).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)

metadata = MetaData()
"""Every CoopLab table (:class:`db.models.Base` declares the rest into it)."""

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets 64-bit ids for the big tables.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Naive UTC in the database, aware UTC in Python (naive input is taken to be UTC)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


experiments = Table(
    "experiments", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("description", Text, nullable=False, default=""),
    Column("tags", JSON, nullable=False, default=list),
    Column("config", JSON, nullable=False, default=dict),
    Column("created_at", UTCDateTime, nullable=False, default=utcnow),
    Column("updated_at", UTCDateTime, nullable=False, default=utcnow),
)

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True),
    Column("experiment_id", ForeignKey("experiments.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("attempt", Integer, nullable=False, default=1),
    Column("status", String(20), nullable=False, index=True),
    Column("config", JSON, nullable=False, default=dict),
    Column("queue", String(100), nullable=False),
    Column("device", String(100)),
    Column("celery_task_id", String(200)),
    Column("worker", String(200)),
    Column("created_at", UTCDateTime, nullable=False, default=utcnow),
    Column("started_at", UTCDateTime),
    Column("finished_at", UTCDateTime),
    Column("heartbeat_at", UTCDateTime),
    Column("step", Integer, nullable=False, default=0),
    Column("env_step", BigInteger, nullable=False, default=0),
    Column("total_steps", Integer),
    Column("first_step", Integer),
    Column("first_step_at", UTCDateTime),
    Column("last_step_at", UTCDateTime),
    Column("error", Text),
    Column("resumed_from", ForeignKey("runs.id", ondelete="SET NULL")),
    Column("stop_requested", Boolean, nullable=False, default=False),
    Column("stop_requested_at", UTCDateTime),
    # the last time the run's job finished storing a file of the run's artifacts (checkpoints, exports)
    Column("storing_at", UTCDateTime),
    # the attempt the retry policy queued after this run was lost (jobs.retries; a plain id: no foreign key)
    Column("retried_as", Integer),
    Column("tags", JSON, nullable=False, default=list),
    Column("notes", Text, nullable=False, default=""),
    # the readable name a researcher gave the run (None: shown by its experiment's name and id)
    Column("name", String(200)),
    Column("log_path", Text),
    Column("output_dir", Text),
)

__all__ = ["BigId", "UTCDateTime", "experiments", "metadata", "runs", "utcnow"]
