"""Facts about the database itself (called by :class:`db.store.Store`): its id."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.models import MetaRow

DATABASE_ID = "database_id"


def read_database_id(session: Session) -> str | None:
    """The database's random id, or None when it has none yet."""
    return session.scalar(select(MetaRow.value).where(MetaRow.key == DATABASE_ID)) or None


def database_id(session: Session) -> str:
    """The database's random id, given when the schema was created (created here if missing)."""
    value = read_database_id(session)
    if value:
        return value
    try:
        with session.begin_nested():
            session.add(MetaRow(key=DATABASE_ID, value=uuid.uuid4().hex))
    except IntegrityError:  # another process created it first
        pass
    return session.scalar(select(MetaRow.value).where(MetaRow.key == DATABASE_ID)) or ""
