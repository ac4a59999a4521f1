"""Naming the process that holds a SQLite database's write lock (from /proc/locks)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from db.sqlite_locks import describe_write_lock_holders, parse_proc_locks, write_lock_holders

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")

HOLD = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO t VALUES (1)")
print("holding", flush=True)
time.sleep(60)
"""


def test_parse_proc_locks_picks_write_holders_of_the_byte_on_that_file():
    text = "\n".join([
        "1: POSIX  ADVISORY  WRITE 4711 00:2a:1234 120 120",      # the write lock: a holder
        "2: POSIX  ADVISORY  READ  4712 00:2a:1234 123 123",      # a reader's slot: not the write lock
        "3: POSIX  ADVISORY  WRITE 4713 00:2a:9999 120 120",      # another file
        "4: POSIX  ADVISORY  WRITE 4714 00:2b:1234 120 120",      # same inode, other device
        "5: POSIX  ADVISORY  WRITE 4715 00:2a:1234 0 EOF",        # a range to the end covers 120
        "6: -> POSIX  ADVISORY  WRITE 4716 00:2a:1234 120 120",   # a blocked request
        "7: FLOCK  ADVISORY  WRITE 4717 00:2a:1234 0 EOF",        # flock, not POSIX
        "8: POSIX  ADVISORY  WRITE 4718 00:2a:1234 121 130",      # does not cover 120
    ])
    assert parse_proc_locks(text, (0, 0x2a), 1234, 120) == [4711, 4715]


def test_the_process_holding_the_write_lock_is_named(tmp_path: Path):
    path = tmp_path / "cooplab.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x INTEGER)")
    assert write_lock_holders(path) == []
    assert describe_write_lock_holders(path) == ""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path), "marker-arg"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        holders = write_lock_holders(path)
        assert [h.pid for h in holders] == [holder.pid]
        assert "marker-arg" in holders[0].command
        # a writer here is refused: the holder is what the message names
        conn.execute("PRAGMA busy_timeout=100")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            conn.execute("BEGIN IMMEDIATE")
        assert describe_write_lock_holders(path).startswith(f"the write lock is held by pid {holder.pid} (")
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 5
    while write_lock_holders(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert write_lock_holders(path) == []
    conn.close()


def test_a_locked_write_through_the_store_engine_logs_the_holder(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from db.engine import make_engine, writer

    path = tmp_path / "cooplab.db"
    engine = make_engine(f"sqlite:///{path}")
    with writer(engine).begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    holder = subprocess.Popen([sys.executable, str(script), str(path), "holder-of-the-lock"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with (caplog.at_level("WARNING", logger="db.engine"), pytest.raises(OperationalError, match="locked"),
              writer(engine, lock_wait_s=0.2).begin() as conn):
            conn.execute(text("INSERT INTO t VALUES (2)"))
    finally:
        holder.kill()
        holder.wait()
        engine.dispose()
    assert f"database is locked; the write lock is held by pid {holder.pid}" in caplog.text
    assert "holder-of-the-lock" in caplog.text
