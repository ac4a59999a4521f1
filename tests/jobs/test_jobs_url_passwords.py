"""No command prints a database or broker password: ``cooplab db upgrade`` against a PostgreSQL
URL that carries one, a database that does not answer, a refused broker URL, and a database URL
that is not one (each shows the URL with the password as ``***``)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from cooplab.cli import app
from db.engine import resolve_url
from db.urls import redact_url
from tests.jobs.helpers import tiny_config
from tests.postgres_schema import migrated_schema

PASSWORD = "Sup3r-Secret-pw"
runner = CliRunner()


@pytest.fixture
def postgres_url_with_password():
    """An empty schema of its own on the test PostgreSQL server, as a URL with a password (the local
    server trusts loopback connections, so any password is accepted); dropped afterwards."""
    with migrated_schema("cooplab_pw", migrate=False) as url:
        yield resolve_url(url).set(password=PASSWORD).render_as_string(hide_password=False)


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
