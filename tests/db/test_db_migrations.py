"""Migrations from an empty database, model/migration agreement, engine setup per backend."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from db.engine import make_engine
from db.migrate import current_revision, downgrade, head_revision, upgrade
from db.models import Base
from db.store import Store

TABLES = {"experiments", "runs", "metrics", "metric_rollups", "episodes", "turns", "checkpoints", "workers", "cooplab_meta",
          "studies", "study_trials",
          "evaluations", "eval_requests", "run_environments", "saved_views", "alembic_version"}


def test_upgrade_from_empty_then_downgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'fresh.db'}"  # the folder is created too
    assert current_revision(url) is None
    upgrade(url)
    upgrade(url)  # a second upgrade is a no-op
    assert current_revision(url) == head_revision()
    engine = make_engine(url)
    assert set(inspect(engine).get_table_names()) == TABLES
    engine.dispose()
    downgrade(url, "base")
    engine = make_engine(url)
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()


def test_saved_views_migration_downgrades_and_upgrades_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'views.db'}"
    upgrade(url)
    with Store(url) as store:
        store.save_view("owner", "runs_columns", "all", {"config": ["seed"]})
        store.create_experiment("kept")
    downgrade(url, "0014")
    engine = make_engine(url)
    assert set(inspect(engine).get_table_names()) == TABLES - {"saved_views"}
    engine.dispose()
    upgrade(url)
    with Store(url) as store:
        assert store.saved_view("owner", "runs_columns", "all") is None  # the table came back empty
        assert [e.name for e in store.list_experiments()] == ["kept"]  # nothing else was touched


def test_migrations_match_the_models(store_url: str) -> None:
    engine = make_engine(store_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    assert diff == []


def test_in_memory_store_migrates_itself() -> None:
    with Store("sqlite://", migrate=True) as store:
        exp = store.create_experiment("mem")
        assert store.get_experiment(exp.id).name == "mem"


def test_sqlite_connections_use_wal_foreign_keys_and_busy_timeout(sqlite_store: Store) -> None:
    with sqlite_store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30_000


def test_bad_urls_name_the_problem() -> None:
    with pytest.raises(ValueError, match="not a database URL: 'cooplab.db'"):
        make_engine("cooplab.db")


def _upgrade_in_child(url: str) -> None:
    upgrade(url)


def test_processes_upgrading_at_once_do_not_collide(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_upgrade_in_child, args=(url,)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert current_revision(url) == head_revision()
