"""Whether the kernel's OOM killer ended a job: its memory cgroup's ``oom_kill`` counter, read when the
job starts and again when it is found dead.

A job process killed by ``SIGKILL`` leaves no words; the kernel counts each OOM kill in the memory
cgroup the process ran in: cgroup v2 ``memory.events`` (``oom_kill N``, counting the cgroups below too)
or cgroup v1 ``memory.oom_control`` (the same line, kernel 4.13 and later). The job records the
counter's file and value in its job file (:mod:`jobs.jobfile`) before it claims the run; whoever
settles the dead job on the same machine reads the file again (:func:`oom_cause`), and a counter that
rose means the job died out of memory. No kernel log is read.

Parsing is pure (:func:`memory_cgroup`, :func:`oom_kill_count`, :func:`counter_candidates`,
:func:`oom_reason`); :func:`read_counter` and :func:`oom_cause` touch ``/proc`` and ``/sys``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_FILE = "memory.oom_control"
V2_FILE = "memory.events"


@dataclass(frozen=True)
class OomCounter:
    """One reading of a memory cgroup's OOM-kill counter: the cgroup (as ``/proc/<pid>/cgroup`` names
    it), the file read and the count."""

    cgroup: str
    file: str
    kills: int


def memory_cgroup(proc_cgroup: str) -> tuple[int, str] | None:
    """``(version, path)`` of the memory cgroup in the text of ``/proc/<pid>/cgroup``: the cgroup v1
    hierarchy with the ``memory`` controller (``4:memory:/a/b``) when there is one, else the v2 one
    (``0::/a/b``); None when neither is listed."""
    unified = None
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "memory" in controllers.split(","):
            return 1, path or "/"
        if controllers == "" and parts[0] == "0":
            unified = path or "/"
    return (2, unified) if unified is not None else None


def counter_candidates(version: int, path: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """Where the OOM-kill counter of cgroup ``path`` may be, in the order to try: v1 under the memory
    hierarchy's mount; v2 at the root mount (a pure v2 system) or under ``unified`` (a hybrid one)."""
    relative = path.strip("/")
    if version == 1:
        return [root / "memory" / relative / V1_FILE]
    return [root / relative / V2_FILE, root / "unified" / relative / V2_FILE]


def oom_kill_count(text: str) -> int | None:
    """The ``oom_kill N`` value in the text of ``memory.events`` or ``memory.oom_control``; None when the
    line is missing (a kernel older than 4.13 on cgroup v1)."""
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value.strip())
    return None


def oom_reason(cgroup: str, file: str, before: int, after: int | None) -> str | None:
    """The reason a job whose cgroup's counter went from ``before`` to ``after`` ended, when it rose."""
    if after is None or after <= before:
        return None
    return (f"out of memory (the kernel's OOM killer ended the job; cgroup {cgroup} {Path(file).name} "
            f"oom_kill {after}, {before} when the job started)")


def _read_count(file: Path) -> int | None:
    with contextlib.suppress(OSError):
        return oom_kill_count(file.read_text())
    return None


def read_counter(pid: int | str = "self", root: Path = CGROUP_ROOT) -> OomCounter | None:
    """The OOM-kill counter of process ``pid``'s memory cgroup now; None when this system does not
    expose one (no memory controller, no ``oom_kill`` line, a cgroup mounted out of sight)."""
    try:
        found = memory_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return None
    if found is None:
        return None
    version, path = found
    for file in counter_candidates(version, path, root):
        kills = _read_count(file)
        if kills is not None:
            return OomCounter(cgroup=path, file=str(file), kills=kills)
    return None


def oom_cause(cgroup: str | None, file: str | None, before: int | None) -> str | None:
    """"out of memory (...)" when the counter a job recorded at its start (``file``, ``before``) has
    risen since; None when it has not, or nothing was recorded."""
    if not cgroup or not file or before is None:
        return None
    return oom_reason(cgroup, file, before, _read_count(Path(file)))
