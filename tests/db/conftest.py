"""Fixtures for the store tests: every store test runs on SQLite, and on PostgreSQL when
``COOPLAB_TEST_POSTGRES_URL`` names a server that answers (otherwise those cases skip, naming it).

SQLite: each test gets a copy of the suite's migrated template (``migrated_sqlite``, made once per pytest
process by the real migrations), in its own ``tmp_path``.
PostgreSQL: one schema per session (migrated once), every table emptied and every id sequence restarted
before each test, so ids start at 1 as in a fresh SQLite copy (a test may name an id no row has).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from db.engine import resolve_url
from db.models import Base
from db.store import Store
from tests.postgres_schema import migrated_schema


@pytest.fixture(scope="session")
def postgres_schema() -> Iterator[tuple[str, Engine]]:
    """A migrated schema of its own on the test PostgreSQL server (dropped at the end): its URL and an
    engine for cleaning it."""
    with migrated_schema("cooplab_test") as schema_url:
        engine = create_engine(resolve_url(schema_url))
        try:
            yield schema_url, engine
        finally:
            engine.dispose()


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
