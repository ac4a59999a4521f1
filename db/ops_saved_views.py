"""Saved views (:class:`SavedViewOps`, part of :class:`db.store.Store`): what a dashboard user chose to
see, kept in the database so that a reload or another browser finds it again: the runs table's columns
per experiment, the metrics and smoothing of the run page's and Compare's charts.

A choice is one JSON object per ``owner`` (who chose it: the dashboard's one account, ``app.saved_views``),
``view`` (which choice: ``runs_columns``, ...) and ``scope`` (where: an experiment's id, ``all``). The
store keeps what it is given; the dashboard checks what it loads against what exists now (a column
whose metric is gone is dropped), so a stale choice never breaks a page.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from db.engine import StoreBase
from db.models import SavedViewRow, utcnow

MAX_OWNER_CHARS = 100
MAX_VIEW_CHARS = 40
MAX_SCOPE_CHARS = 100
MAX_CHOICE_CHARS = 20_000
"""The longest choice stored, as JSON text (a few hundred picked columns; more is not a view)."""


def _key(owner: str, view: str, scope: str) -> tuple[str, str, str]:
    for label, value, limit in (("owner", owner, MAX_OWNER_CHARS), ("view", view, MAX_VIEW_CHARS),
                                ("scope", scope, MAX_SCOPE_CHARS)):
        if not isinstance(value, str) or not value or len(value) > limit:
            raise ValueError(f"a saved view's {label} must be 1 to {limit} characters, got {value!r}")
    return owner, view, scope


class SavedViewOps(StoreBase):
    """Saved views: the operations of :class:`db.store.Store` on them, each one transaction."""

    def saved_view(self, owner: str, view: str, scope: str) -> dict[str, Any] | None:
        """The choice ``owner`` saved for ``view`` in ``scope``, or None when there is none."""
        key = _key(owner, view, scope)
        with self._read() as session:
            row = session.get(SavedViewRow, key)
            return copy.deepcopy(row.choice) if row is not None and isinstance(row.choice, dict) else None

    def save_view(self, owner: str, view: str, scope: str, choice: Mapping[str, Any]) -> None:
        """Keep ``choice`` (a JSON-able mapping, at most :data:`MAX_CHOICE_CHARS` as JSON) as ``owner``'s
        ``view`` in ``scope``, replacing the one saved before. :class:`ValueError` for a key out of its
        limits or a choice too long or not JSON."""
        key = _key(owner, view, scope)
        try:
            text = json.dumps(dict(choice), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a saved view's choice must be JSON: {exc}") from exc
        if len(text) > MAX_CHOICE_CHARS:
            raise ValueError(f"a saved view's choice is {len(text)} characters of JSON; at most "
                             f"{MAX_CHOICE_CHARS} are kept")
        value = json.loads(text)
        with self._write() as session:
            row = session.get(SavedViewRow, key)
            if row is None:
                try:
                    with session.begin_nested():
                        session.add(SavedViewRow(owner=owner, view=view, scope=scope, choice=value,
                                                 updated_at=utcnow()))
                    return
                except IntegrityError:  # another session saved it first: replace theirs
                    row = session.get(SavedViewRow, key, populate_existing=True)
                    if row is None:
                        raise
            row.choice, row.updated_at = value, utcnow()

    def forget_view(self, owner: str, view: str, scope: str) -> bool:
        """Drop ``owner``'s saved ``view`` in ``scope`` (back to the defaults); False when none was saved."""
        owner, view, scope = _key(owner, view, scope)
        with self._write() as session:
            result = session.execute(delete(SavedViewRow).where(
                SavedViewRow.owner == owner, SavedViewRow.view == view, SavedViewRow.scope == scope))
            return bool(getattr(result, "rowcount", 0))
