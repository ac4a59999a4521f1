"""Runs' environments (:class:`EnvironmentOps`, part of :class:`db.store.Store`): what a run's job
recorded about where and with what it trained (``jobs.run_environment``: git commit, dirty diff,
Python and package versions, host, command line), one JSON document per run, in its own table so that
listing runs never reads it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from db.engine import StoreBase
from db.models import RunEnvironmentRow, utcnow
from db.ops_runs import load


class EnvironmentOps(StoreBase):
    """Run environments: the operations of :class:`db.store.Store` on them, each one transaction."""

    def record_run_environment(self, run_id: int, data: Mapping[str, Any]) -> None:
        """Store run ``run_id``'s environment (a JSON-able mapping), replacing one recorded before (a
        job that starts again records where it runs now). :class:`NotFoundError` for an unknown run."""
        with self._write() as session:
            load(session, run_id)
            row = session.get(RunEnvironmentRow, run_id)
            if row is None:
                session.add(RunEnvironmentRow(run_id=run_id, data=dict(data), captured_at=utcnow()))
            else:
                row.data, row.captured_at = dict(data), utcnow()

    def run_environment(self, run_id: int) -> dict[str, Any] | None:
        """Run ``run_id``'s recorded environment, or None when its job recorded none (not started yet,
        or trained before environments were recorded)."""
        with self._read() as session:
            row = session.get(RunEnvironmentRow, run_id)
            return copy.deepcopy(row.data) if row is not None else None
