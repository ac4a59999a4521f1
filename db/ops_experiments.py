"""Experiments: :class:`ExperimentOps`, the part of :class:`db.store.Store` that reads and writes them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Text, cast, func, or_, select
from sqlalchemy.orm import Session

from db import convert
from db.engine import StoreBase
from db.errors import DuplicateNameError, NotFoundError, RunActiveError, StaleEditError
from db.models import ExperimentRow, RunRow, utcnow
from db.records import Experiment
from db.run_writes import check_experiment_name
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


_check_name = check_experiment_name


def _ensure_unique(session: Session, name: str, exclude_id: int | None = None) -> None:
    existing = session.scalar(select(ExperimentRow.id).where(ExperimentRow.name == name))
    if existing is not None and existing != exclude_id:
        raise DuplicateNameError(f"an experiment named {name!r} already exists (id {existing}); pick another name")


def load(session: Session, experiment_id: int) -> ExperimentRow:
    row = session.get(ExperimentRow, experiment_id)
    if row is None:
        raise NotFoundError(f"no experiment with id {experiment_id}")
    return row


class ExperimentOps(StoreBase):
    """Experiments: the operations of :class:`db.store.Store` on them, each one transaction."""

    def create_experiment(self, name: str, *, description: str = "", tags: Iterable[str] = (),
                          config: Mapping[str, Any] | None = None) -> Experiment:
        """Create an experiment; ``name`` must be unique (else :class:`DuplicateNameError`)."""
        with self._write() as session:
            name = _check_name(name)
            _ensure_unique(session, name)
            now = utcnow()
            row = ExperimentRow(name=name, description=description or "", tags=convert.clean_tags(tags),
                                config=convert.json_config(config), created_at=now, updated_at=now)
            session.add(row)
            session.flush()
            return convert.experiment(row)

    # get_or_create_experiment: db.run_writes.RunWrites (on Core; cooplab submit runs it without the ORM)

    def get_experiment(self, experiment_id: int) -> Experiment:
        """The experiment with this id (else :class:`NotFoundError`)."""
        with self._read() as session:
            return convert.experiment(load(session, experiment_id))

    def find_experiment(self, name: str) -> Experiment | None:
        """The experiment with exactly this name, or None."""
        with self._read() as session:
            row = session.scalar(select(ExperimentRow).where(ExperimentRow.name == name.strip()))
            return convert.experiment(row) if row is not None else None

    def list_experiments(self, *, search: str | None = None, tag: str | None = None, limit: int = 200,
                         offset: int = 0) -> list[Experiment]:
        """Experiments, newest first; ``search`` matches name or description (case-insensitive
        substring), ``tag`` keeps those carrying that exact tag."""
        with self._read() as session:
            query = select(ExperimentRow).order_by(ExperimentRow.id.desc()).limit(limit).offset(offset)
            if search:
                pattern = like_pattern(search)
                query = query.where(or_(func.lower(ExperimentRow.name).like(pattern, escape="\\"),
                                        func.lower(ExperimentRow.description).like(pattern, escape="\\")))
            if tag:
                query = query.where(cast(ExperimentRow.tags, Text).like(tag_pattern(tag), escape="\\"))
            return [convert.experiment(row) for row in session.scalars(query)]

    def update_experiment(self, experiment_id: int, *, name: str | None = None,
                          description: str | None = None, tags: Iterable[str] | None = None,
                          config: Mapping[str, Any] | None = None,
                          if_saved_at: datetime | None = None) -> Experiment:
        """Change the given fields (None leaves a field as it is) and bump ``updated_at``. With
        ``if_saved_at`` (the ``updated_at`` the edit started from) the change is made only if nobody saved
        the experiment since, else :class:`StaleEditError` (compare-and-set in the write transaction)."""
        with self._write() as session:
            row = load(session, experiment_id)
            if if_saved_at is not None and row.updated_at != if_saved_at:
                raise StaleEditError(experiment_id, row.updated_at)
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

    def delete_experiment(self, experiment_id: int, *, force: bool = False) -> None:
        """Delete an experiment with all its runs, metrics and transcripts. Refuses
        (:class:`RunActiveError`) while one of its runs is active, unless ``force``."""
        with self._write() as session:
            row = load(session, experiment_id)
            if not force:
                active = session.scalars(select(RunRow.id).where(RunRow.experiment_id == experiment_id,
                                                                 RunRow.status.in_(ACTIVE_STATUSES))).all()
                if active:
                    raise RunActiveError(f"experiment {experiment_id} still has active runs {list(active)}; stop them "
                                         f"first or pass force=True")
            session.delete(row)

    def clone_experiment(self, experiment_id: int, name: str, *, description: str | None = None) -> Experiment:
        """A new experiment with the same config and tags (and description unless given), no runs. The
        copied config carries the clone's name (and the given description), so editing and saving the
        clone never collides with the source's name."""
        with self._write() as session:
            source = load(session, experiment_id)
            description = source.description if description is None else description
            config = dict(source.config or {})
            if "name" in config:
                config["name"] = _check_name(name)
                if "description" in config:
                    config["description"] = description
            return self.within(session).create_experiment(
                name, description=description, tags=list(source.tags or ()), config=config)

    def experiment_tags(self) -> list[str]:
        """Every tag used by some experiment, sorted."""
        with self._read() as session:
            tags: set[str] = set()
            for row_tags in session.scalars(select(ExperimentRow.tags)):
                tags.update(row_tags or ())
            return sorted(tags)
