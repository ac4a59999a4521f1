"""Runs whose job cannot reach the artifact store (:class:`StoreOutageOps`, part of :class:`db.store.Store`).

A job whose uploads wait through an artifact store outage (``jobs.artifacts.outage``) notes it here
when the store stops answering and clears it when it answers again; the dashboard's run page and
Workers page show "store unreachable since ...". The notes live in the database's key/value table
(``cooplab_meta``, key ``store-outage:run-<id>``, a JSON value): a passing state of a live run, not a
column of every run. The time is the database server's (:mod:`db.clock`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select

from db.clock import server_now
from db.engine import StoreBase
from db.models import MetaRow

PREFIX = "store-outage:run-"
MAX_PROBLEM_CHARS = 1000


@dataclass(frozen=True)
class StoreOutageNote:
    """Run ``run_id``'s job has not reached the artifact store since ``since`` (database server time,
    UTC); ``problem`` is the store's last error."""

    run_id: int
    since: datetime
    problem: str


def _key(run_id: int) -> str:
    return f"{PREFIX}{int(run_id)}"


class StoreOutageOps(StoreBase):
    """Store outage notes: the operations of :class:`db.store.Store` on them, each one transaction."""

    def note_store_outage(self, run_id: int, problem: str | None) -> None:
        """Note that run ``run_id``'s job cannot reach the artifact store (``problem``, its error), keeping
        the first time noted; ``None`` clears the note (the store answers again)."""
        key = _key(run_id)
        with self._write() as session:
            if problem is None:
                session.execute(delete(MetaRow).where(MetaRow.key == key))
                return
            row = session.get(MetaRow, key)
            since = None
            if row is not None:
                try:
                    since = json.loads(row.value)["since"]
                except (ValueError, KeyError, TypeError):
                    since = None
            value = json.dumps({"since": since or server_now(session).astimezone(UTC).isoformat(),
                                "problem": problem[:MAX_PROBLEM_CHARS]})
            if row is None:
                session.add(MetaRow(key=key, value=value))
            else:
                row.value = value

    def store_outages(self, run_ids: list[int] | None = None) -> dict[int, StoreOutageNote]:
        """The runs (of ``run_ids``, or all) whose job last noted the artifact store unreachable."""
        with self._read() as session:
            query = select(MetaRow.key, MetaRow.value)
            if run_ids is None:
                query = query.where(MetaRow.key.startswith(PREFIX))
            else:
                query = query.where(MetaRow.key.in_([_key(r) for r in run_ids]))
            found = {}
            for key, value in session.execute(query):
                try:
                    run_id = int(key[len(PREFIX):])
                    data = json.loads(value)
                    since = datetime.fromisoformat(data["since"])
                except (ValueError, KeyError, TypeError):
                    continue
                found[run_id] = StoreOutageNote(run_id, since if since.tzinfo else since.replace(tzinfo=UTC),
                                                str(data.get("problem", "")))
            return found
