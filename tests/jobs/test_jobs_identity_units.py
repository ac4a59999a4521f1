"""Small pieces of the fault handling: the SQLite file identity check, a cancelled run's message id,
the job file's pulse, and a bounded lock wait."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from db.engine import make_engine, writer
from db.migrate import upgrade
from db.store import Store
from jobs import jobfile
from jobs.consume import run_id_of
from jobs.db_identity import DatabaseFile, sqlite_path


def test_the_identity_of_a_sqlite_file_follows_its_path(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'cooplab.db'}"
    upgrade(url)
    with Store(url) as store:
        known = DatabaseFile.of(store)
    assert known is not None and known.path == tmp_path / "cooplab.db"
    assert known.problem() is None
    os.replace(tmp_path / "cooplab.db", tmp_path / "moved.db")
    assert known.problem().startswith(f"the database file {known.path} (database id {known.database_id}) was "
                                      "deleted while the run trained")
    # a connection made after the deletion (a worker's maintenance pass) creates an empty file at the path:
    # the database was still deleted, not replaced by another one
    with Store(url) as empty:
        empty.server_now()
    said = known.problem()
    assert said.startswith(f"the database file {known.path} (database id {known.database_id}) was deleted while "
                           "the run trained (an empty file, inode "), said
    (tmp_path / "cooplab.db").unlink()
    upgrade(url)  # another database at the same place
    with Store(url) as other:
        other_id = other.database_id()
    said = known.problem()
    assert f"inode {known.inode}, database id {known.database_id}" in said
    assert f"database id {other_id})" in said and "was replaced while the run trained" in said


def test_only_sqlite_files_have_an_identity():
    assert sqlite_path("sqlite://") is None
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql://u@h/db") is None
    assert sqlite_path("sqlite:////data/x.db") == Path("/data/x.db")


@pytest.mark.parametrize(("args", "expected"), [([7], 7), (["12"], 12), ([], None), (None, None), (["x"], None)])
def test_the_run_id_of_a_training_message(args, expected):
    assert run_id_of(args) == expected


def test_a_job_file_pulses_until_released(tmp_path: Path):
    job = jobfile.JobFile.acquire(tmp_path, 5)
    assert job is not None
    os.utime(job.path, (0, 0))
    job.start_pulse(0.05)
    time.sleep(0.3)
    first = jobfile.probe(tmp_path, 5)
    assert first is not None and first.held and first.touched_at > time.time() - 2
    job.release(remove=False)
    os.utime(job.path, (0, 0))
    time.sleep(0.2)
    assert jobfile.probe(tmp_path, 5).touched_at == 0  # released: no more pulses


def test_a_lock_wait_must_be_positive(tmp_path: Path):
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(ValueError, match="lock_wait_s must be > 0 seconds, got 0"):
        writer(engine, lock_wait_s=0)
    engine.dispose()


def test_a_database_on_a_read_only_disk_is_named_with_the_cause(tmp_path: Path):
    """It said only SQLite's words ("unable to open database file", "disk I/O error")."""
    from sqlalchemy.exc import OperationalError

    from jobs.faults import resource_reason
    from tests.jobs.fault_helpers import small_filesystem

    folder = tmp_path / "ro"
    with small_filesystem(folder, "5m"):
        url = f"sqlite:///{folder / 'cooplab.db'}"
        upgrade(url)
        remounted = subprocess.run(["mount", "-o", "remount,ro", str(folder)], capture_output=True, text=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount a tmpfs read-only here: {remounted.stderr.strip()}")
        with Store(url) as store, pytest.raises(OperationalError) as caught:
            store.create_experiment("x")
        said = resource_reason(caught.value, database_url=url)
        assert said is not None and said.startswith(f"read-only file system writing the database {folder / 'cooplab.db'}")
        full = OperationalError("INSERT", {}, Exception("disk I/O error"))
        subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
        import shutil

        (folder / "filler").write_bytes(b"\0" * (shutil.disk_usage(folder).free - 16 * 1024))  # nearly full
        assert resource_reason(full, database_url=url).startswith(
            f"no space left on device writing the database {folder / 'cooplab.db'}")
