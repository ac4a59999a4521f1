"""A migrated SQLite database made once per pytest process, copied for each test that needs an empty one.

Migrating a fresh file runs all of ``db/migrations`` (tens of milliseconds, hundreds of times in the
suite); copying a migrated one is a file copy. The template is made by the real migrations
(:func:`db.migrate.upgrade`), so every test on a copy still runs on the schema they build, and the tests of
the migrations themselves keep upgrading their own databases.

A copy is what a fresh migration would have made: the complete database (the template's write-ahead log
is folded into its file before any copy), owner-only (0600, as :func:`db.engine.make_engine` makes a new
SQLite file), with a database id of its own (migration 0003 draws a random one per database; a data
directory is bound to the id of its database).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

from db.migrate import upgrade

WAL_SUFFIXES = ("-wal", "-shm")


def build_template(path: Path) -> Path:
    """Migrate a new SQLite database at ``path`` to the newest revision and fold its write-ahead log into
    the file, so the file alone is the whole database. Returns ``path``."""
    upgrade(f"sqlite:///{path}")
    conn = sqlite3.connect(path)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    leftover = [path.with_name(path.name + suffix) for suffix in WAL_SUFFIXES]
    wal = leftover[0]
    if busy or (wal.exists() and wal.stat().st_size):
        raise RuntimeError(f"the migrated template {path} still has an unfolded write-ahead log {wal}; "
                           "something holds it open: close every connection to it before copying")
    return path


def copy_database(template: Path, dest: Path) -> str:
    """Copy the migrated ``template`` to ``dest`` (a new file, 0600; its folder made 0700 when missing),
    give the copy a database id of its own, and return its ``sqlite:///`` URL.

    Raises ``FileExistsError`` when ``dest`` exists: a test's database is always new."""
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(template.read_bytes())
    conn = sqlite3.connect(dest)
    try:
        with conn:
            conn.execute("UPDATE cooplab_meta SET value = ? WHERE key = 'database_id'", (uuid.uuid4().hex,))
    finally:
        conn.close()
    return f"sqlite:///{dest}"
