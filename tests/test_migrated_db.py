"""The suite's migrated SQLite template (``tests/migrated_db.py``): a copy is what a fresh migration makes."""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from db.migrate import current_revision, head_revision, upgrade
from db.store import Store


def _schema(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                            "ORDER BY type, name").fetchall()
    finally:
        conn.close()


def _database_id(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM cooplab_meta WHERE key = 'database_id'").fetchone()[0]
    finally:
        conn.close()


def test_a_copy_has_the_schema_a_fresh_migration_makes(tmp_path: Path,
                                                        migrated_sqlite: Callable[[Path], str]):
    fresh = tmp_path / "fresh.db"
    upgrade(f"sqlite:///{fresh}")
    url = migrated_sqlite(tmp_path / "copy" / "cooplab.db")
    assert current_revision(url) == head_revision()
    copied = _schema(tmp_path / "copy" / "cooplab.db")
    assert copied == _schema(fresh)
    assert any(name == "runs" for _, name, _ in copied)


def test_the_template_file_alone_is_the_whole_database(migrated_db_template: Path, tmp_path: Path):
    wal = migrated_db_template.with_name(migrated_db_template.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    alone = tmp_path / "alone.db"  # the file without its -wal or -shm: every table is there
    alone.write_bytes(migrated_db_template.read_bytes())
    assert current_revision(f"sqlite:///{alone}") == head_revision()


def test_a_copy_is_owner_only_and_opens_without_a_warning(tmp_path: Path,
                                                         migrated_sqlite: Callable[[Path], str],
                                                         caplog: pytest.LogCaptureFixture):
    path = tmp_path / "home" / "cooplab.db"
    url = migrated_sqlite(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with caplog.at_level("WARNING", logger="db.engine"), Store(url) as store:
        assert store.create_experiment("copied").id == 1
    assert not [r for r in caplog.records if r.name == "db.engine"], caplog.text


def test_each_copy_is_a_database_of_its_own(tmp_path: Path, migrated_db_template: Path,
                                            migrated_sqlite: Callable[[Path], str]):
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    migrated_sqlite(first)
    migrated_sqlite(second)
    ids = {_database_id(migrated_db_template), _database_id(first), _database_id(second)}
    assert len(ids) == 3


def test_a_copy_never_replaces_a_database(tmp_path: Path, migrated_sqlite: Callable[[Path], str]):
    path = tmp_path / "cooplab.db"
    path.write_bytes(b"someone's data")
    with pytest.raises(FileExistsError):
        migrated_sqlite(path)
    assert path.read_bytes() == b"someone's data"
