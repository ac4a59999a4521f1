"""Who a sandboxed process runs as outside its namespaces, and sweeping up what it left running.

As root, every sandbox gets a dedicated unprivileged uid (a slot of this process), so the
process-count limit counts only that sandbox and a left-over process is found by its uid. As any
other user, sandboxes run as the caller and the process-count limit is set above the caller's own
current count.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

UID_BASE = 1_500_000_000
SLOTS_PER_PROCESS = 256

_slot_lock = threading.Lock()
_free_slots: list[int] = list(range(SLOTS_PER_PROCESS))


def slot_uid(slot: int, pid: int | None = None) -> int:
    """The uid of ``slot`` in process ``pid`` (spread apart so two trainers never share uids)."""
    return UID_BASE + ((os.getpid() if pid is None else pid) % 1_000_000) * SLOTS_PER_PROCESS + slot


@contextlib.contextmanager
def dedicated_uid() -> Iterator[int | None]:
    """A fresh unprivileged uid while the block runs (as root), else ``None``; swept on exit."""
    if os.geteuid() != 0:
        yield None
        return
    with _slot_lock:
        if not _free_slots:
            raise RuntimeError(f"more than {SLOTS_PER_PROCESS} concurrent sandboxes in one process")
        slot = _free_slots.pop(0)
    uid = slot_uid(slot)
    try:
        yield uid
    finally:
        kill_uid_processes(uid)
        with _slot_lock:
            _free_slots.append(slot)


def _proc_status(pid: str) -> dict[str, str]:
    with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
        return dict(line.split(":", 1) for line in fh if ":" in line)


def uid_pids(uid: int) -> list[int]:
    """Live (non-zombie) processes that run as ``uid``."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:  # cheap filter; the status file decides
                continue
            fields = _proc_status(name)
            if int(fields["Uid"].split()[0]) == uid and fields["State"].split()[0] not in ("Z", "X"):
                pids.append(int(name))
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return pids


def own_task_count() -> int:
    """Threads of every process of the current user (what RLIMIT_NPROC counts)."""
    uid, count = os.getuid(), 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = _proc_status(name)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields.get("Threads", "1").strip() or 1)
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return count


def kill_uid_processes(uid: int, *, rounds: int = 100) -> int:
    """SIGKILL every process owned by ``uid`` until a scan finds none; return how many were killed.

    Once a scan finds no process of ``uid``, none can appear: only its own processes could fork.
    """
    killed = 0
    for _ in range(rounds):
        pids = uid_pids(uid)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.002)
    return killed
