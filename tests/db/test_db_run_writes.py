"""A submit's writes without the ORM (``db.run_writes.RunWrites`` on an engine alone, what ``cooplab
submit`` uses on other URLs) and without SQLAlchemy (``db.sqlite_writes.SqliteRunWrites``, what it uses
on a SQLite file; ``db.postgres_writes.PostgresRunWrites``, what it uses on PostgreSQL through psycopg2)
write what the store writes, return what is stored, refuse what the store refuses, and import no
``sqlalchemy.orm`` (respectively no ``sqlalchemy``); the ORM classes of the two tables are mapped onto
the same Core tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import JSON, Text, cast, select

from db.dbapi_writes import DbapiRunWrites
from db.errors import NotFoundError
from db.models import Base, ExperimentRow, RunRow
from db.postgres_writes import PostgresRunWrites, postgres_connect_args
from db.run_writes import RunWrites
from db.sqlite_writes import SqliteRunWrites, plain_sqlite_file
from db.store import Store
from db.tables import experiments, metadata, runs

ROOT = Path(__file__).resolve().parents[2]


def _row(store: Store, table, row_id: int) -> dict:  # type: ignore[no-untyped-def]
    """A row's values (its JSON columns also as the text stored), but its id and times."""
    stored_text = [cast(column, Text).label(f"{column.name} as text") for column in table.c
                   if isinstance(column.type, JSON)]
    with store.engine.connect() as conn:
        found = conn.execute(select(table, *stored_text).where(table.c.id == row_id)).mappings().one()
    return {k: v for k, v in found.items() if k not in ("id", "created_at", "updated_at")}


def test_the_orm_classes_are_mapped_onto_the_core_tables() -> None:
    assert Base.metadata is metadata
    assert ExperimentRow.__table__ is experiments and RunRow.__table__ is runs


def _sqlite3_writes(store: Store) -> SqliteRunWrites:
    url = store.engine.url.render_as_string(hide_password=False)
    path = plain_sqlite_file(url)
    assert path is not None, url
    return SqliteRunWrites(url, path)


def _dbapi_writes(store: Store) -> DbapiRunWrites:
    """The writer without SQLAlchemy for the store's database: ``sqlite3`` or ``psycopg2``."""
    if store.engine.dialect.name == "sqlite":
        return _sqlite3_writes(store)
    url = store.engine.url.render_as_string(hide_password=False)
    connect_args = postgres_connect_args(url)
    assert connect_args is not None, url
    return PostgresRunWrites(url, connect_args)


def test_core_writes_store_and_return_what_the_store_does(store: Store) -> None:
    _writes_store_and_return_what_the_store_does(store, RunWrites(store.engine))


def test_dbapi_writes_store_and_return_what_the_store_does(store: Store) -> None:
    """``sqlite3`` on SQLite, ``psycopg2`` on PostgreSQL."""
    writes = _dbapi_writes(store)
    try:
        _writes_store_and_return_what_the_store_does(store, writes)
    finally:
        writes.close()


def _writes_store_and_return_what_the_store_does(store: Store, writes: RunWrites | DbapiRunWrites) -> None:
    config = {"name": "x", "trainer": {"max_steps": 5}, "nested": [1, {"a": None}]}
    by_core = writes.get_or_create_experiment("core", description="d", tags=["a", " a", "b"], config=config)
    by_store = store.get_or_create_experiment("orm", description="d", tags=["a", " a", "b"], config=config)
    assert by_core == store.get_experiment(by_core.id) and by_store == store.get_experiment(by_store.id)
    assert _row(store, experiments, by_core.id) == {**_row(store, experiments, by_store.id), "name": "core"}
    assert writes.get_or_create_experiment(" core ", description="other") == by_core  # the existing one, as is

    core_run = writes.create_run(by_core.id, config, " cuda:0 ", total_steps=5, tags=("t",), notes="n")
    store_run = store.create_run(by_core.id, config, " cuda:0 ", total_steps=5, tags=("t",), notes="n")
    assert core_run == store.get_run(core_run.id) and core_run.queue == "cuda:0" and core_run.attempt == 1
    assert _row(store, runs, core_run.id) == _row(store, runs, store_run.id)
    again = writes.create_run(by_core.id, {}, "cpu", resumed_from=core_run.id)
    assert again.attempt == 2 and again == store.get_run(again.id)

    updated = writes.update_run(core_run.id, celery_task_id="task-1", total_steps=7)
    assert updated == store.get_run(core_run.id) and (updated.celery_task_id, updated.total_steps) == ("task-1", 7)
    assert writes.update_run(core_run.id, celery_task_id="task-1") == updated  # nothing changes


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda w, e, r: w.get_or_create_experiment("  "), ValueError, "non-empty name"),
    (lambda w, e, r: w.get_or_create_experiment("x" * 201), ValueError, "201 characters"),
    (lambda w, e, r: w.create_run(e + 1000, {}, "cpu"), NotFoundError, "no experiment with id"),
    (lambda w, e, r: w.create_run(e, {}, " "), ValueError, "needs a queue name"),
    (lambda w, e, r: w.create_run(e, {}, "cpu", total_steps=-1), ValueError, "total_steps must be >= 0"),
    (lambda w, e, r: w.create_run(e, {}, "cpu", resumed_from=r + 1000), NotFoundError, "no run with id"),
    (lambda w, e, r: w.create_run(e, [1], "cpu"), TypeError, "config must be a mapping"),
    (lambda w, e, r: w.update_run(r + 1000, worker="w"), NotFoundError, "no run with id"),
    (lambda w, e, r: w.update_run(r, total_steps=-2), ValueError, "total_steps must be >= 0"),
])
def test_core_writes_refuse_what_the_store_refuses(store: Store, experiment_id: int, run_id: int, call, error,
                                                    message) -> None:  # type: ignore[no-untyped-def]
    before = (store.list_experiments(), store.list_runs())
    dbapi = _dbapi_writes(store)
    try:
        for writer in (RunWrites(store.engine), store, dbapi):
            with pytest.raises(error, match=message):
                call(writer, experiment_id, run_id)
    finally:
        dbapi.close()
    assert (store.list_experiments(), store.list_runs()) == before


def test_core_writes_import_no_orm() -> None:
    code = ("import sys; from db.run_writes import RunWrites; "
            "print(sorted(m for m in ('sqlalchemy.orm', 'db.models', 'db.store') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_dbapi_writes_import_no_sqlalchemy_and_stamp_runs_with_the_engines_clock() -> None:
    code = ("import sys; from db.sqlite_writes import SqliteRunWrites; from db.postgres_writes import "
            "PostgresRunWrites; print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    from sqlalchemy import select
    from sqlalchemy.dialects import postgresql, sqlite

    from db import postgres_writes, sqlite_writes
    from db.clock import db_now

    for dialect, now in ((sqlite.dialect(), sqlite_writes._NOW), (postgresql.dialect(), postgres_writes.NOW)):
        assert str(select(db_now()).compile(dialect=dialect)).replace("\n", " ") == f"{now} AS db_now_1"


@pytest.mark.parametrize("url", [
    "postgresql+psycopg2://postgres@127.0.0.1:5432/test", "postgresql+psycopg2://u:p%40ss%3Aw@db.example/cooplab",
    "postgresql+psycopg2://u@[::1]:5433/x?sslmode=require&options=-csearch_path%3Ds1",
    "postgresql+psycopg2://u@h/db?connect_timeout=3", "postgresql+psycopg2:///db", "postgresql://u@h/db"])
def test_postgresql_connect_args_are_the_engines(url: str) -> None:
    """What ``psycopg2.connect`` is given is what the engine of ``db.engine.make_engine`` gives it."""
    from sqlalchemy import event

    from db.engine import make_engine

    class Connecting(Exception):
        pass

    given: dict = {}
    engine = make_engine(url)

    @event.listens_for(engine, "do_connect")
    def _connect(dialect, record, cargs, cparams) -> None:  # type: ignore[no-untyped-def]
        given.update(cparams, cargs=cargs)
        raise Connecting

    try:
        with pytest.raises(Connecting):
            engine.connect()
    finally:
        engine.dispose()
    assert given.pop("cargs") == [] and postgres_connect_args(url) == given


@pytest.mark.parametrize("url", [
    "sqlite:///x.db", "postgresql+psycopg://u@h/db", "postgresql+psycopg2://u@h/db?host=a&host=b",
    "postgresql+psycopg2://u@h:notaport/db", "mysql://u@h/db"])
def test_other_urls_keep_the_engine(url: str) -> None:
    assert postgres_connect_args(url) is None


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:///data/cooplab.db", Path("data/cooplab.db")), ("sqlite:////abs/x.db", Path("/abs/x.db")),
    ("sqlite:///~/x.db", Path("~/x.db").expanduser()), ("sqlite://", None), ("sqlite:///:memory:", None),
    ("sqlite:///x.db?timeout=3", None), ("sqlite:///a%20b.db", None), ("sqlite:///file:x?mode=ro&uri=true", None),
    ("postgresql+psycopg2://u@h/db", None)])
def test_only_a_plain_sqlite_file_url_is_written_with_sqlite3(url: str, path: Path | None) -> None:
    assert plain_sqlite_file(url) == path


def test_sqlite3_writes_wait_for_the_write_lock_and_then_name_its_holder(sqlite_store: Store, caplog) -> None:  # type: ignore[no-untyped-def]
    """A write that waits out its busy timeout fails with SQLite's "database is locked" (the message the
    Core writes give) and logs who holds the lock; nothing is written."""
    import logging
    import sqlite3

    writes = _sqlite3_writes(sqlite_store)
    slow = SqliteRunWrites(writes.url, writes.path, busy_timeout_ms=200)
    holder = sqlite3.connect(writes.path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with caplog.at_level(logging.WARNING, logger="db.engine"), \
                pytest.raises(sqlite3.OperationalError, match="database is locked"):
            slow.get_or_create_experiment("waits")
        assert f"{writes.path}: database is locked" in caplog.text
        holder.execute("ROLLBACK")
        assert slow.get_or_create_experiment("waits").name == "waits"
    finally:
        holder.close()
        slow.close()
        writes.close()
