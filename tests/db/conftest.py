"""Fixtures for the store tests: every store test runs on SQLite, and on PostgreSQL when
``COOPLAB_TEST_POSTGRES_URL`` names a server that answers (otherwise those cases skip, naming it).

SQLite: each test gets a copy of the suite's migrated template (``migrated_sqlite``, made once per pytest
process by the real migrations), in its own ``tmp_path``.
PostgreSQL: one schema per session (migrated once), every table emptied and every id sequence restarted
before each test, so ids start at 1 as in a fresh SQLite copy (a test may name an id no row has).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from db.engine import resolve_url
from db.migrate import upgrade
from db.models import Base
from db.store import Store

PG_ENV = "COOPLAB_TEST_POSTGRES_URL"


def _schema_url(url: str, schema: str) -> str:
    return resolve_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)


@pytest.fixture(scope="session")
def postgres_schema() -> Iterator[tuple[str, Engine]]:
    """A migrated schema of its own on the test PostgreSQL server (dropped at the end): its URL and an
    engine for cleaning it."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"no PostgreSQL server: {PG_ENV} is not set (make test sets it to the local server)")
    admin = create_engine(resolve_url(url), isolation_level="AUTOCOMMIT")
    schema = f"cooplab_test_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except Exception as err:  # noqa: BLE001 - any failure to connect means the server is not there
        admin.dispose()
        pytest.skip(f"PostgreSQL server at {url} ({PG_ENV}) did not answer: {type(err).__name__}")
    schema_url = _schema_url(url, schema)
    engine = create_engine(resolve_url(schema_url))
    try:
        upgrade(schema_url)
        yield schema_url, engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> str:
    """A migrated, empty database URL: SQLite file or a cleaned PostgreSQL schema."""
    if request.param == "sqlite":
        return migrated_sqlite(tmp_path / "cooplab.db")
    url, engine = request.getfixturevalue("postgres_schema")
    with engine.begin() as conn:  # DELETE is much faster than TRUNCATE on tables this small
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
        sequences = conn.execute(text(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema()")).scalars().all()
        for sequence in sequences:
            conn.execute(text(f'ALTER SEQUENCE "{sequence}" RESTART WITH 1'))
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[Store]:
    """SQLite only, for behaviour specific to the default backend."""
    s = Store(migrated_sqlite(tmp_path / "cooplab.db"))
    yield s
    s.close()


@pytest.fixture
def experiment_id(store: Store) -> int:
    return store.create_experiment("exp", description="a test experiment", tags=["t1"], config={"seed": 1}).id


@pytest.fixture
def run_id(store: Store, experiment_id: int) -> int:
    return store.create_run(experiment_id, {"seed": 1}, "cpu", total_steps=10).id


@pytest.fixture(scope="module")
def skewed() -> Iterator[Callable[[str, float, str], str]]:
    """``skewed(url, shift_s, code)``: run ``code`` (with ``store``, a Store on ``url``) in this module's
    skewed-clock writer process, its clock reading ``shift_s`` seconds off; returns what it printed."""
    from tests.db.skewed_writer import skewed_writer

    with skewed_writer() as run:
        yield run
