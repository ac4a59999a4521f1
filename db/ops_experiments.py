"""Experiment operations on an open session (called by :class:`db.store.Store`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Text, cast, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db import convert
from db.errors import DuplicateNameError, NotFoundError, RunActiveError
from db.models import ExperimentRow, RunRow, utcnow
from db.records import Experiment
from db.states import ACTIVE_STATUSES


def like_pattern(text: str) -> str:
    """A case-folded ``LIKE`` pattern matching ``text`` anywhere, with ``%``, ``_`` and ``\\`` escaped
    (use with ``escape="\\\\"``)."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def tag_pattern(tag: str) -> str:
    """A ``LIKE`` pattern matching a JSON list of strings that holds exactly ``tag``."""
    encoded = json.dumps(tag)
    escaped = encoded.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError("an experiment needs a non-empty name")
    name = name.strip()
    if len(name) > 200:
        raise ValueError(f"experiment name is {len(name)} characters long; keep it within 200")
    return name


def _ensure_unique(session: Session, name: str, exclude_id: int | None = None) -> None:
    existing = session.scalar(select(ExperimentRow.id).where(ExperimentRow.name == name))
    if existing is not None and existing != exclude_id:
        raise DuplicateNameError(f"an experiment named {name!r} already exists (id {existing}); pick another name")


def load(session: Session, experiment_id: int) -> ExperimentRow:
    row = session.get(ExperimentRow, experiment_id)
    if row is None:
        raise NotFoundError(f"no experiment with id {experiment_id}")
    return row


def create_experiment(session: Session, *, name: str, description: str, tags: Iterable[str],
                      config: Mapping[str, Any] | None) -> Experiment:
    name = _check_name(name)
    _ensure_unique(session, name)
    now = utcnow()
    row = ExperimentRow(name=name, description=description or "", tags=convert.clean_tags(tags),
                        config=convert.json_config(config), created_at=now, updated_at=now)
    session.add(row)
    session.flush()
    return convert.experiment(row)


def get_or_create_experiment(session: Session, *, name: str, description: str, tags: Iterable[str],
                             config: Mapping[str, Any] | None) -> Experiment:
    """The experiment named ``name``, created (with the other fields) when there is none. Safe when
    several processes ask at once: SQLite's write transactions run one at a time; on PostgreSQL a
    concurrent insert that wins the unique name makes this one read the winner's row."""
    name = _check_name(name)
    row = session.scalar(select(ExperimentRow).where(ExperimentRow.name == name))
    if row is not None:
        return convert.experiment(row)
    now = utcnow()
    try:
        with session.begin_nested():
            row = ExperimentRow(name=name, description=description or "", tags=convert.clean_tags(tags),
                                config=convert.json_config(config), created_at=now, updated_at=now)
            session.add(row)
    except IntegrityError:
        row = session.scalar(select(ExperimentRow).where(ExperimentRow.name == name))
        if row is None:
            raise
    return convert.experiment(row)


def get_experiment(session: Session, experiment_id: int) -> Experiment:
    return convert.experiment(load(session, experiment_id))


def find_experiment(session: Session, name: str) -> Experiment | None:
    row = session.scalar(select(ExperimentRow).where(ExperimentRow.name == name.strip()))
    return convert.experiment(row) if row is not None else None


def list_experiments(session: Session, *, search: str | None, tag: str | None, limit: int,
                     offset: int) -> list[Experiment]:
    query = select(ExperimentRow).order_by(ExperimentRow.id.desc()).limit(limit).offset(offset)
    if search:
        pattern = like_pattern(search)
        query = query.where(or_(func.lower(ExperimentRow.name).like(pattern, escape="\\"),
                                func.lower(ExperimentRow.description).like(pattern, escape="\\")))
    if tag:
        query = query.where(cast(ExperimentRow.tags, Text).like(tag_pattern(tag), escape="\\"))
    return [convert.experiment(row) for row in session.scalars(query)]


def update_experiment(session: Session, experiment_id: int, *, name: str | None, description: str | None,
                      tags: Iterable[str] | None, config: Mapping[str, Any] | None) -> Experiment:
    row = load(session, experiment_id)
    if name is not None:
        name = _check_name(name)
        _ensure_unique(session, name, exclude_id=experiment_id)
        row.name = name
    if description is not None:
        row.description = description
    if tags is not None:
        row.tags = convert.clean_tags(tags)
    if config is not None:
        row.config = convert.json_config(config)
    row.updated_at = utcnow()
    session.flush()
    return convert.experiment(row)


def delete_experiment(session: Session, experiment_id: int, *, force: bool) -> None:
    row = load(session, experiment_id)
    if not force:
        active = session.scalars(select(RunRow.id).where(RunRow.experiment_id == experiment_id,
                                                         RunRow.status.in_(ACTIVE_STATUSES))).all()
        if active:
            raise RunActiveError(f"experiment {experiment_id} still has active runs {list(active)}; stop them "
                                 f"first or pass force=True")
    session.delete(row)


def clone_experiment(session: Session, experiment_id: int, *, name: str, description: str | None) -> Experiment:
    source = load(session, experiment_id)
    return create_experiment(session, name=name,
                             description=source.description if description is None else description,
                             tags=list(source.tags or ()), config=dict(source.config or {}))


def experiment_tags(session: Session) -> list[str]:
    tags: set[str] = set()
    for row_tags in session.scalars(select(ExperimentRow.tags)):
        tags.update(row_tags or ())
    return sorted(tags)
