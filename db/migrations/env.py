"""Alembic environment for CoopLab: runs on the connection :mod:`db.migrate` hands over, or on an
engine built from ``sqlalchemy.url`` when the alembic command line is used."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from db.engine import make_engine, writer
from db.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: call db.migrate.upgrade(url), or set sqlalchemy.url")
    engine = make_engine(url)
    try:
        with writer(engine, bounded=False).begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; use db.migrate.upgrade(url)")
run_migrations_online()
