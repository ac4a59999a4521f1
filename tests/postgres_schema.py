"""A migrated PostgreSQL schema of its own on the test server (``COOPLAB_TEST_POSTGRES_URL``), dropped
afterwards: what the store tests (``tests/db/conftest.py``, one per session) and the submit path's
PostgreSQL guard (one per test) run on. Without the server, the test using it skips, naming it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text

from db.engine import resolve_url
from db.migrate import upgrade
from db.urls import redact_url

PG_ENV = "COOPLAB_TEST_POSTGRES_URL"


def schema_url(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on its search path."""
    return resolve_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False)


@contextmanager
def migrated_schema(prefix: str, *, migrate: bool = True) -> Iterator[str]:
    """The URL of a new schema named ``<prefix>_<random>``, migrated to the head revision (left empty
    with ``migrate=False``); skips when the server is not set or does not answer."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"no PostgreSQL server: {PG_ENV} is not set (make test sets it to the local server)")
    admin = create_engine(resolve_url(url), isolation_level="AUTOCOMMIT")
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except Exception as err:  # noqa: BLE001 - any failure to connect means the server is not there
        admin.dispose()
        pytest.skip(f"PostgreSQL server at {redact_url(url)} ({PG_ENV}) did not answer: {type(err).__name__}")
    try:
        migrated = schema_url(url, schema)
        if migrate:
            upgrade(migrated)
        yield migrated
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
