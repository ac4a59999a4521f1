"""The submit's writer without SQLAlchemy on PostgreSQL (``db.postgres_writes.PostgresRunWrites``) keeps
working when the server drops its connection between two writes (a restart, an idle timeout), as the
engine's pre-pinged pool does, and a connection lost inside a write raises the error that lost it, not
the rollback's. The server's side is real: ``pg_terminate_backend`` ends the writer's session."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg2
import pytest
from sqlalchemy import Engine, make_url, text

from db.postgres_writes import PostgresRunWrites, postgres_connect_args

ROOT = Path(__file__).resolve().parents[2]


def _writes(url: str) -> PostgresRunWrites:
    connect_args = postgres_connect_args(url)
    assert connect_args is not None, url
    return PostgresRunWrites(url, connect_args)


def _end_session(engine: Engine, writes: PostgresRunWrites) -> None:
    """End the writer's session from another connection, as a server restart would."""
    pid = writes._conn.get_backend_pid()
    with engine.begin() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()


def test_a_write_after_the_server_dropped_the_connection_connects_again(
        postgres_schema: tuple[str, Engine]) -> None:
    url, engine = postgres_schema
    writes = _writes(url)
    try:
        experiment = writes.get_or_create_experiment(f"dropped-{uuid.uuid4().hex[:8]}")
        _end_session(engine, writes)
        assert writes.current_revisions()  # read on a new connection, not taken for an empty database
        _end_session(engine, writes)
        run = writes.create_run(experiment.id, {"seed": 1}, "cpu")
        assert writes.update_run(run.id, celery_task_id="t").celery_task_id == "t"
    finally:
        writes.close()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT celery_task_id FROM runs WHERE id = :id"), {"id": run.id}).scalar() == "t"


def test_a_connection_lost_inside_a_write_raises_its_own_error(postgres_schema: tuple[str, Engine]) -> None:
    url, _ = postgres_schema
    writes = _writes(url)
    try:
        with pytest.raises(psycopg2.OperationalError), writes._write() as conn:  # not InterfaceError
            writes._execute(conn, "SELECT pg_terminate_backend(pg_backend_pid())")
        assert writes._conn is None  # the next write connects again
        assert writes.get_or_create_experiment(f"after-{uuid.uuid4().hex[:8]}").id
    finally:
        writes.close()


def test_a_server_that_does_not_answer_is_said_at_once_without_alembic(postgres_schema: tuple[str, Engine]) -> None:
    """The schema check's connection failure is the error: alembic is not loaded to wait for it again."""
    from tests.jobs.fault_helpers import free_port

    url = make_url(postgres_schema[0]).set(host="127.0.0.1", port=free_port()).render_as_string(hide_password=False)
    code = ("import sys, psycopg2; from db.postgres_writes import PostgresRunWrites, postgres_connect_args\n"
            f"url = {url!r}\n"
            "try:\n    PostgresRunWrites(url, postgres_connect_args(url)).ensure_schema()\n"
            "except psycopg2.OperationalError as exc:\n    print('refused' if 'refused' in str(exc) else exc)\n"
            "print(sorted(m for m in ('alembic', 'sqlalchemy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.split("\n")[:2] == ["refused", "[]"], out.stdout + out.stderr
