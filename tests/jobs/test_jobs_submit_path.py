"""The submit path stays cheap: `cooplab submit` and `api.submit` import no alembic (when the schema is
current), torch, transformers, streamlit, pandas, numpy, plotly, pydantic-settings, CLI framework (typer,
rich), other algorithms' config classes, or SQLAlchemy at all on a SQLite file (they write through
``db.sqlite_writes`` with ``sqlite3``; on PostgreSQL through ``db.run_writes`` on Core, without the ORM)
or Celery and kombu on the filesystem broker (``jobs.broker_fs_write`` writes the message); on PostgreSQL
and Redis no SQLAlchemy, Celery, kombu or redis-py either (``db.postgres_writes``,
``jobs.broker_redis_write``); a refused config is refused before the store or the broker client is imported; the schema check reads one row
instead of loading alembic; and the Python API for scripted sweeps (:mod:`cooplab.api`) queues, lists
and waits for runs. No worker: cheap."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from db import states
from db.engine import make_engine
from db.schema_version import at_head, ensure_schema, head_revisions
from engine.schema.run_config import ConfigError
from tests.jobs.helpers import ROOT, tiny_config
from tests.postgres_schema import migrated_schema

HEAVY = ("alembic", "torch", "transformers", "streamlit", "pandas", "numpy", "plotly")
# what a plain submit of a MAGRPO config has no use for (cooplab.submit_path, engine.schema.config_class,
# db.rollups, jobs.env_settings, db.run_writes, SQLAlchemy on a SQLite file, Celery and kombu on the filesystem
# broker): the CLI framework,
# pydantic-settings, the other algorithms' config classes, the ORM and the store's other operations
NOT_FOR_SUBMIT = (*HEAVY, "typer", "rich", "pydantic_settings", "engine.schema.algorithms",
                  "engine.schema.preference_configs", "engine.schema.actor_critic_configs",
                  "sqlalchemy", "db.run_writes", "db.models", "db.store", "celery", "kombu")
STORE_AND_BROKER = ("sqlalchemy", "celery", "kombu", "db.store", "jobs.client")
NOT_FOR_SUBMIT_ON_SERVERS = (*NOT_FOR_SUBMIT, "redis")  # PostgreSQL through psycopg2, Redis

_SUBMIT_AND_LIST_IMPORTS = """
import atexit, sys
atexit.register(lambda: print("HEAVY", sorted(m for m in {heavy!r} if m in sys.modules)))
sys.argv = ["cooplab", "submit", *{paths!r}, "--experiment", "cheap"]
from cooplab.cli import main
main()
"""


def _submit(paths: list, watched: tuple[str, ...]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("COOPLAB_DEBUG", None)
    code = _SUBMIT_AND_LIST_IMPORTS.format(heavy=watched, paths=[str(p) for p in paths])
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_cooplab_submit_imports_only_what_it_needs(jobs_env, store, tmp_path):
    """Two configs in one call (one start-up for both): both queued, nothing it has no use for imported."""
    paths = [tmp_path / "run.yaml", tmp_path / "longer.yaml"]
    paths[0].write_text(yaml.safe_dump(tiny_config()))
    paths[1].write_text(yaml.safe_dump(tiny_config(max_steps=4)))
    result = _submit(paths, NOT_FOR_SUBMIT)
    assert result.returncode == 0, result.stderr
    second, first = store.list_runs()
    assert result.stdout.splitlines() == [f"run {first.id} queued on cpu (experiment 'cheap')",
                                          f"run {second.id} queued on cpu (experiment 'cheap')", "HEAVY []"]
    assert {first.status, second.status} == {states.QUEUED} and (first.total_steps, second.total_steps) == (3, 4)


@pytest.fixture
def postgres_url():  # type: ignore[no-untyped-def]
    """A migrated schema of its own on the test PostgreSQL server (its URL), dropped afterwards."""
    with migrated_schema("cooplab_submit") as url:
        yield url


def test_cooplab_submit_on_postgresql_and_redis_imports_only_what_it_needs(redis_env, postgres_url, monkeypatch,
                                                                           tmp_path):
    """The rows through psycopg2 alone, the messages pushed without Celery, kombu or redis-py: both runs
    stored queued with their task ids, both messages in the queue."""
    import redis

    from db.store import Store

    monkeypatch.setenv("COOPLAB_DATABASE_URL", postgres_url)
    paths = [tmp_path / "run.yaml", tmp_path / "longer.yaml"]
    paths[0].write_text(yaml.safe_dump(tiny_config()))
    paths[1].write_text(yaml.safe_dump(tiny_config(max_steps=4)))
    result = _submit(paths, NOT_FOR_SUBMIT_ON_SERVERS)
    assert result.returncode == 0, result.stderr
    with Store(postgres_url) as store:
        second, first = store.list_runs()
    assert result.stdout.splitlines() == [f"run {first.id} queued on cpu (experiment 'cheap')",
                                          f"run {second.id} queued on cpu (experiment 'cheap')", "HEAVY []"]
    assert {first.status, second.status} == {states.QUEUED} and (first.total_steps, second.total_steps) == (3, 4)
    client = redis.Redis.from_url(redis_env.resolved_broker_url)
    try:
        messages = [json.loads(m) for m in client.lrange("cpu", 0, -1)]
    finally:
        client.close()
    assert [m["headers"]["id"] for m in messages] == [second.celery_task_id, first.celery_task_id]


def test_a_refused_config_is_refused_before_the_store_or_the_broker_is_loaded(jobs_env, store, tmp_path):
    """Validation is complete (the algorithm's own rules included) and comes first: the refusal is the
    typer command's line and exit status, and nothing is stored."""
    good, bad = tmp_path / "run.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(tiny_config()))
    bad.write_text(yaml.safe_dump(tiny_config(num_generations=1)))
    result = _submit([good, bad], STORE_AND_BROKER)
    assert result.returncode == 2
    assert result.stderr.startswith(f"invalid run config {bad}:\ntrainer.num_generations: must be >= 2 for magrpo")
    assert result.stdout.splitlines() == ["HEAVY []"] and store.list_runs() == []


@pytest.mark.parametrize("argv", [["submit", "a.yaml", "-d", "cuda:0", "--experiment=x"],
                                  ["submit", "-dcpu", "a.yaml", "b.yaml", "-e", "y"], ["submit", "a.yaml"]])
def test_a_plain_submit_line_is_read_as_typer_reads_it(argv, monkeypatch):
    """The typer command hands what it read to the same function; both read the same arguments."""
    from typer.testing import CliRunner

    from cooplab import submit_path
    from cooplab.typer_app import app

    read = []
    monkeypatch.setattr(submit_path, "submit_configs", lambda args, **_: read.append(args))
    assert CliRunner().invoke(app, argv).exit_code == 0
    assert read == [submit_path.plain_submit(argv)]


@pytest.mark.parametrize("argv", [["submit"], ["submit", "--help"], ["submit", "a.yaml", "--bogus"],
                                  ["submit", "a.yaml", "-e"], ["submit", "a.yaml", "-e", "x", "-e", "y"],
                                  ["submit", "--", "a.yaml"], ["runs"]])
def test_anything_but_a_plain_submit_goes_through_typer(argv):
    from cooplab.submit_path import plain_submit

    assert plain_submit(argv) is None


def test_the_api_submits_without_the_orm(jobs_env, store, tmp_path):
    """A script's ``api.submit`` writes through the same Core operations as ``cooplab submit``."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tiny_config()))
    code = (f"import sys; from cooplab import api; ids = api.submit([{str(path)!r}] * 2, experiment='api'); "
            f"print(ids, sorted(m for m in {NOT_FOR_SUBMIT!r} if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    second, first = store.list_runs()
    assert result.stdout.strip() == f"[{first.id}, {second.id}] []"
    assert {first.status, second.status} == {states.QUEUED} and first.celery_task_id and second.celery_task_id


def test_importing_the_api_loads_nothing_heavy():
    watched = ("sqlalchemy", "celery", "pydantic", *HEAVY)
    code = f"import sys; from cooplab import api; print(sorted(m for m in {watched!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_schema_check_agrees_with_alembic_and_needs_no_migration_at_head(jobs_env):
    from db.migrate import head_revision

    assert head_revisions() == {head_revision()}
    engine = make_engine(jobs_env.resolved_database_url)  # the suite's migrated template
    try:
        assert at_head(engine) and ensure_schema(engine) is False
    finally:
        engine.dispose()
    empty = make_engine("sqlite://")
    try:
        assert not at_head(empty)
    finally:
        empty.dispose()


def test_the_sqlite3_schema_check_agrees_with_the_engine_one_and_hands_the_rest_to_alembic(jobs_env, tmp_path):
    """At the head revision nothing runs; at a revision this code does not know, alembic says so, as it
    did through the engine; an empty file is migrated (the submit then writes to it)."""
    import sqlite3

    from alembic.util import CommandError

    from db.sqlite_writes import SqliteRunWrites, plain_sqlite_file

    url = jobs_env.resolved_database_url
    writes = SqliteRunWrites(url, plain_sqlite_file(url))
    try:
        assert writes.current_revisions() == head_revisions() and writes.ensure_schema() is False
        with sqlite3.connect(writes.path) as conn:
            conn.execute("UPDATE alembic_version SET version_num = 'ffffffff'")
        engine = make_engine(url)
        try:
            with pytest.raises(CommandError, match="Can't locate revision identified by 'ffffffff'") as by_engine:
                ensure_schema(engine)
        finally:
            engine.dispose()
        with pytest.raises(CommandError) as by_sqlite3:
            writes.ensure_schema()
        assert str(by_sqlite3.value) == str(by_engine.value)
    finally:
        writes.close()
    empty_url = f"sqlite:///{tmp_path / 'new' / 'cooplab.db'}"
    empty = SqliteRunWrites(empty_url, plain_sqlite_file(empty_url))
    try:
        assert empty.current_revisions() == frozenset() and empty.ensure_schema() is True
        assert empty.current_revisions() == head_revisions()
        assert empty.get_or_create_experiment("first").id == 1
        assert oct(empty.path.stat().st_mode & 0o777) == oct(0o600)
    finally:
        empty.close()


def test_the_api_submits_lists_and_waits_and_stores_nothing_when_one_config_is_refused(jobs_env, store, tmp_path):
    from cooplab import api
    from jobs.client import cancel_queued

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tiny_config()))
    bad = tiny_config(num_generations=1)
    with pytest.raises(ConfigError, match="num_generations"):
        api.submit([path, bad], experiment="sweep")
    assert store.list_runs() == [] and store.find_experiment("sweep") is None

    ids = api.submit([path, tiny_config(max_steps=2)], experiment="sweep")
    ids += api.submit(tiny_config(), experiment="sweep")
    assert len(ids) == 3 and all(i.unsent is None for i in ids)
    listed = api.runs(experiment="sweep")
    assert [r.id for r in listed] == sorted(ids, reverse=True)
    assert {r.status for r in listed} == {states.QUEUED} and listed[1].total_steps == 2
    with pytest.raises(TimeoutError, match=f"runs still active after 0 s: {ids[0]} queued"):
        api.wait(ids, timeout=0)
    for run_id in ids:
        cancel_queued(run_id)
    done = api.wait(ids, timeout=10, poll_s=0.1)
    assert list(done) == ids and {r.status for r in done.values()} == {states.CANCELLED}
    with pytest.raises(LookupError, match="no experiment named 'nope'"):
        api.runs(experiment="nope")
