"""The job file: how any process on the worker's machine tells at once whether a run's job still lives,
and where a job leaves the cause of its end when it cannot write it to the database.

A job process creates ``<data dir>/jobs/run-<id>.job`` and holds an exclusive ``flock`` on it from
before it claims the run until after it has written the run's final state. The kernel drops the lock
when the process dies, however it dies (``kill -9``, out of memory, its worker killed), so a process
on the same machine that finds a run live in the database and its job file unlocked knows the job is
gone without waiting for the heartbeat to expire (:mod:`jobs.liveness`).

The file is created at a fixed size (:data:`JOB_FILE_BYTES`), so writing the *last words* into it later
needs no new disk space: when the final state cannot be written (the database's disk is full), the job
records the state and its reason there, and whoever settles the run next uses them, so ``failed`` or
``lost`` carries the real cause.

The file also records the job's memory cgroup and its OOM-kill counter at the start (:mod:`jobs.oom`),
so a job that died by ``SIGKILL`` is told apart from one the kernel killed for want of memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from jobs import oom

log = logging.getLogger(__name__)

JOB_FILE_BYTES = 4096


def jobs_dir(data_dir: Path) -> Path:
    return data_dir / "jobs"


def job_file_path(data_dir: Path, run_id: int) -> Path:
    """``<data dir>/jobs/run-<id>.job``."""
    return jobs_dir(data_dir) / f"run-{run_id}.job"


def _encode(record: dict) -> bytes:
    """``record`` as JSON padded with spaces to exactly :data:`JOB_FILE_BYTES` (the reason is cut to fit)."""
    data = json.dumps(record).encode()
    if len(data) > JOB_FILE_BYTES:
        reason = str(record.get("reason", ""))
        excess = len(data) - JOB_FILE_BYTES + 16
        record = {**record, "reason": reason[: max(0, len(reason) - excess)] + " [...]"}
        data = json.dumps(record).encode()
    return data + b" " * (JOB_FILE_BYTES - len(data))


def _decode(data: bytes) -> dict:
    try:
        value = json.loads(data.rstrip(b" \0\n") or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class JobFile:
    """A job process's lock on its run (see the module docstring)."""

    def __init__(self, path: Path, fd: int | None, run_id: int) -> None:
        self.path = path
        self.fd = fd
        self.run_id = run_id
        self.host = socket.gethostname()
        self.keep = False  # True once last words are written: the file stays for whoever settles the run
        self.oom: dict | None = None  # the OOM-kill counter at the start (jobs.oom), kept in every record
        self._pulse_stop = threading.Event()

    def touch(self) -> None:
        """Mark the job alive now (the file's modification time): a pulse that needs no database."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.utime(self.fd)

    def start_pulse(self, interval_s: float) -> None:
        """Touch the file every ``interval_s`` seconds on a daemon thread until :meth:`release`. A job
        stopped or frozen (SIGSTOP, swapped out) stops pulsing; one whose database writes merely wait
        for a lock keeps pulsing, so the reaper of this machine can tell the two apart
        (:func:`jobs.liveness.alive_here`)."""
        if self.fd is None:
            return
        self.touch()

        def pulse() -> None:
            while not self._pulse_stop.wait(interval_s):
                self.touch()

        threading.Thread(target=pulse, name=f"job-pulse-run-{self.run_id}", daemon=True).start()

    @classmethod
    def acquire(cls, data_dir: Path, run_id: int, *, wait_s: float = 2.0) -> JobFile | None:
        """Create and lock the run's job file. Returns None when another live process holds it (that
        process is executing the run). When the file cannot be created (a full or read-only disk) the
        job goes on without one: its run is then judged by its heartbeat alone."""
        path = job_file_path(data_dir, run_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            log.warning("run %s: no job file (%s); a dead job will be noticed by its heartbeat only", run_id, exc)
            return cls(path, None, run_id)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # another job, or a process looking at it for a moment
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(0.05)
        job = cls(path, fd, run_id)
        counter = oom.read_counter()
        job.oom = None if counter is None else {"cgroup": counter.cgroup, "file": counter.file, "kills": counter.kills}
        try:
            os.pwrite(fd, _encode({"run_id": run_id, "host": job.host, "pid": os.getpid(), "oom": job.oom}), 0)
            os.ftruncate(fd, JOB_FILE_BYTES)
        except OSError as exc:
            log.warning("run %s: could not write its job file (%s)", run_id, exc)
        return job

    def last_words(self, status: str, reason: str) -> bool:
        """Record the state the run should end in and why (the database could not be written). Needs
        no new disk space: the file was created at its full size. Returns True when written."""
        if self.fd is None:
            return False
        record = {"run_id": self.run_id, "host": self.host, "pid": os.getpid(), "oom": self.oom, "status": status,
                  "reason": reason}
        try:
            os.pwrite(self.fd, _encode(record), 0)
            os.fsync(self.fd)
            self.keep = True
            return True
        except OSError:
            log.exception("run %s: could not record its last words either", self.run_id)
            return False

    def release(self, *, remove: bool) -> None:
        """Unlock (and with ``remove`` delete) the file; ``remove=False`` keeps the last words for the
        process that settles the run."""
        self._pulse_stop.set()
        if self.fd is None:
            return
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = None


@dataclass(frozen=True)
class JobState:
    """What a job file says: whether a live process holds it, on which host and pid, and the last words."""

    held: bool
    host: str | None
    pid: int | None
    status: str | None
    reason: str | None
    touched_at: float | None = None
    """When its job last pulsed (:meth:`JobFile.start_pulse`; epoch seconds of this machine's clock)."""
    oom_cgroup: str | None = None
    oom_file: str | None = None
    oom_kills: int | None = None
    """The job's memory cgroup, its OOM-kill counter file and value when the job started (:mod:`jobs.oom`)."""

    def oom_cause(self) -> str | None:
        """"out of memory (...)" when the kernel's OOM killer has killed in the job's cgroup since the job
        started (read now: call it on the job's machine); else None."""
        return oom.oom_cause(self.oom_cgroup, self.oom_file, self.oom_kills)


def probe(data_dir: Path, run_id: int) -> JobState | None:
    """Look at a run's job file without disturbing its job; None when there is none (no judgement)."""
    path = job_file_path(data_dir, run_id)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            held = True
        record = _decode(os.pread(fd, JOB_FILE_BYTES, 0))
        touched_at = os.fstat(fd).st_mtime
    finally:
        os.close(fd)
    pid = record.get("pid")
    counter = record.get("oom") if isinstance(record.get("oom"), dict) else {}
    kills = counter.get("kills")
    return JobState(held=held, host=record.get("host"), pid=int(pid) if isinstance(pid, int) else None,
                    status=record.get("status"), reason=record.get("reason"), touched_at=touched_at,
                    oom_cgroup=counter.get("cgroup"), oom_file=counter.get("file"),
                    oom_kills=kills if isinstance(kills, int) else None)


def remove(data_dir: Path, run_id: int) -> None:
    """Delete a run's job file (after its run was settled); missing is fine."""
    with contextlib.suppress(OSError):
        job_file_path(data_dir, run_id).unlink()
