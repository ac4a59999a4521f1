"""Schema migrations, run from code: ``db.migrate.upgrade(url)``.

The alembic scripts ship inside the package (``db/migrations``), so no ``alembic.ini`` is needed; the
app, the workers and ``cooplab db upgrade`` call :func:`upgrade` when they start. Upgrading an
up-to-date database does nothing, so it is safe to call from every process.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from db.engine import make_engine, writer

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_LOCK_KEY = 0x636F6F706C6162  # "cooplab"


def alembic_config(url: str | None = None) -> Config:
    """An alembic ``Config`` pointing at the packaged migration scripts (and ``url`` when given)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (the newest by default)."""
    engine = make_engine(url)
    try:
        upgrade_engine(engine, revision)
    finally:
        engine.dispose()


def upgrade_engine(engine: Engine, revision: str = "head") -> None:
    """Like :func:`upgrade` for an existing engine (e.g. an in-memory SQLite database)."""
    config = alembic_config()
    with writer(engine, bounded=False).begin() as conn:  # a migration may run long (0002 fills rollups)
        _serialise(conn)
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def _serialise(conn: Connection) -> None:
    """Make concurrent upgrades (the app and a worker starting together) run one after the other:
    SQLite's BEGIN IMMEDIATE already holds the write lock; PostgreSQL takes a transaction-scoped
    advisory lock, so the second upgrade finds the schema current and does nothing."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})


def downgrade(url: str, revision: str) -> None:
    """Take the database at ``url`` back to ``revision`` (``"base"`` drops every table)."""
    engine = make_engine(url)
    try:
        config = alembic_config()
        with writer(engine, bounded=False).begin() as conn:
            _serialise(conn)
            config.attributes["connection"] = conn
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (None for an empty database)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def revisions_between(before: str | None, after: str) -> list[str]:
    """The revisions an upgrade from ``before`` (None: an empty database) to ``after`` ran, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    ran = [r.revision for r in script.iterate_revisions(after, before or "base")]
    return [r for r in reversed(ran) if r != before]


def head_revision() -> str:
    """The newest revision the packaged scripts know."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "db/migrations/versions holds no revision"
    return head
