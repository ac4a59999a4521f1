"""The fault tests' probe of SQLite's write lock (tests/jobs/fault_helpers.py), against a real file."""

from __future__ import annotations

import sqlite3

from tests.jobs.fault_helpers import sqlite_write_locked


def test_the_probe_sees_a_held_write_lock_and_its_release(tmp_path):
    database = tmp_path / "cooplab.db"
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x INTEGER)")
    assert not sqlite_write_locked(database)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    assert sqlite_write_locked(database)
    writer.execute("COMMIT")
    assert not sqlite_write_locked(database)
    reader = sqlite3.connect(database, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert not sqlite_write_locked(database)  # a reader does not keep writers out (WAL)
    reader.close()
    writer.close()
