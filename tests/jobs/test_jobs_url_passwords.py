"""No command prints a database or broker password: ``cooplab db upgrade`` against a PostgreSQL
URL that carries one, a database that does not answer, a refused broker URL, and a database URL
that is not one (each shows the URL with the password as ``***``)."""

from __future__ import annotations

import os
import uuid

import pytest
import yaml
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from cooplab.cli import app
from db.engine import resolve_url
from db.urls import redact_url
from tests.jobs.helpers import tiny_config

PG_ENV = "COOPLAB_TEST_POSTGRES_URL"
PASSWORD = "Sup3r-Secret-pw"
runner = CliRunner()


@pytest.fixture
def postgres_url_with_password():
    """A schema of its own on the test PostgreSQL server, as a URL with a password (the local server
    trusts loopback connections, so any password is accepted); dropped afterwards."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"no PostgreSQL server: {PG_ENV} is not set (make test sets it to the local server)")
    admin = create_engine(resolve_url(url), isolation_level="AUTOCOMMIT")
    schema = f"cooplab_pw_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except Exception as err:  # noqa: BLE001 - any failure to connect means the server is not there
        admin.dispose()
        pytest.skip(f"PostgreSQL server at {url} ({PG_ENV}) did not answer: {type(err).__name__}")
    parsed = resolve_url(url)
    with_password = parsed.set(password=PASSWORD).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield with_password.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_db_upgrade_masks_the_database_password(jobs_env, monkeypatch, postgres_url_with_password) -> None:
    monkeypatch.setenv("COOPLAB_DATABASE_URL", postgres_url_with_password)
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "database up to date: " in result.output and ":***@" in result.output
    assert PASSWORD not in result.output


def test_db_upgrade_of_an_unreachable_database_is_one_line_without_the_password(jobs_env, monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_DATABASE_URL", f"postgresql://cooplab:{PASSWORD}@127.0.0.1:1/cooplab")
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 1
    assert result.output.startswith("error: the database postgresql://cooplab:***@127.0.0.1:1/cooplab cannot be used")
    assert PASSWORD not in result.output


def test_a_refused_broker_url_is_named_without_its_password(jobs_env, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COOPLAB_BROKER_URL", f"sqla+postgresql://cooplab:{PASSWORD}@db.example/cooplab")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(tiny_config()), encoding="utf-8")
    result = runner.invoke(app, ["submit", str(config)])
    assert result.exit_code != 0
    assert "sqla+postgresql://cooplab:***@db.example/cooplab" in result.output, result.output
    assert PASSWORD not in result.output


def test_a_url_that_is_no_database_url_is_named_without_its_password() -> None:
    with pytest.raises(ValueError) as caught:
        resolve_url(f"not a url://cooplab:{PASSWORD}@host/db")
    assert PASSWORD not in str(caught.value) and "cooplab:***@host/db" in str(caught.value)


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://u:secret@h/db", "postgresql://u:***@h/db"),
    ("redis://:secret@h:6379/0", "redis://:***@h:6379/0"),
    ("rediss://default:se%40cret@h:6380/1?ssl_cert_reqs=none", "rediss://default:***@h:6380/1?ssl_cert_reqs=none"),
    ("postgresql://u@h/db?password=secret&sslmode=require", "postgresql://u@h/db?password=***&sslmode=require"),
    ("sqlite:////data/cooplab.db", "sqlite:////data/cooplab.db"),
    ("filesystem://localhost//", "filesystem://localhost//"),
])
def test_redact_url_masks_passwords_in_userinfo_and_query(url: str, shown: str) -> None:
    assert redact_url(url) == shown
