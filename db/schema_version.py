"""Is the database's schema current? A cheap answer for short-lived processes (``cooplab submit``).

:func:`db.migrate.upgrade` loads alembic and every migration script (about 0.3 CPU-seconds) even when
there is nothing to run. :func:`ensure_schema` reads the revision the database is at (one ``SELECT``
of ``alembic_version``) and the head revision from the packaged scripts' ``revision`` /
``down_revision`` lines (text, not imported), and hands over to alembic only when they differ (an
empty database, a database an upgrade behind, a revision this code does not know: alembic then says
what is wrong). :func:`head_revisions` imports no SQLAlchemy (the SQLite writes of a submit,
:mod:`db.sqlite_writes`, read the database's revision with ``sqlite3``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine

VERSIONS_DIR = Path(__file__).resolve().parent / "migrations" / "versions"
_REVISION = re.compile(r"^revision\b[^=\n]*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
_DOWN = re.compile(r"^down_revision\b[^=\n]*=(.*)$", re.MULTILINE)
_QUOTED = re.compile(r"['\"]([^'\"]+)['\"]")


@lru_cache(maxsize=1)
def head_revisions() -> frozenset[str]:
    """The revisions no other packaged script revises (one, unless the history has unmerged branches)."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for script in VERSIONS_DIR.glob("*.py"):
        source = script.read_text(encoding="utf-8")
        found = _REVISION.search(source)
        if found is None:
            continue  # __init__.py
        revisions.add(found.group(1))
        down = _DOWN.search(source)
        if down is not None:
            revised.update(_QUOTED.findall(down.group(1)))
    return frozenset(revisions - revised)


def current_revisions(engine: Engine) -> frozenset[str]:
    """The revisions the database is at (empty for a database without CoopLab's tables)."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    try:
        with engine.connect() as conn:
            return frozenset(row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version")))
    except DBAPIError:  # no alembic_version table yet (an unreachable database fails again in the upgrade)
        return frozenset()


def at_head(engine: Engine) -> bool:
    """True when the database is at the packaged scripts' head revision: nothing to migrate."""
    return current_revisions(engine) == head_revisions()


def ensure_schema(engine: Engine) -> bool:
    """Migrate the database to the head revision unless it is there already (checked without alembic);
    returns True when alembic ran."""
    if at_head(engine):
        return False
    from db.migrate import upgrade_engine  # alembic: only when there is something to do

    upgrade_engine(engine)
    return True


__all__ = ["at_head", "current_revisions", "ensure_schema", "head_revisions"]
