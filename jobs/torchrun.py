"""Running the ranks of a ``parallel_training: fsdp`` run under torchrun, for ``cooplab train`` and the
worker's job alike: ``torchrun --standalone --nproc_per_node=N -m cooplab.fsdp_rank ARGS`` as a
subprocess, every rank's lines streamed (each prefixed ``[rank R]``), and the result: 0 when every rank
ended well, else the exit status with the rank that failed first and its cause (from torchrun's own
report: it stops the other ranks as soon as one dies).

**Nothing outlives the launch.** torchrun runs through this module (``python -m jobs.torchrun``), which
asks the kernel to kill it when the process that launched it dies (``PR_SET_PDEATHSIG``), and every rank
asks the same of torchrun (:func:`die_with_parent`, called by :mod:`cooplab.fsdp_rank`); so a job
process killed by the stop enforcer's ``SIGKILL`` takes its ranks with it. When the launching process
gives up on a launch (an error while it streams the lines), :func:`launch` kills torchrun and every
rank (by their pids: torchrun starts each rank in a session of its own) before it raises.

**A rank that freezes** ends the others' collectives after ``COOPLAB_COLLECTIVE_TIMEOUT_S`` seconds (600 by
default; :mod:`cooplab.fsdp_rank`), which then fail, so the launch never waits forever. Each rank writes
how many step boundaries it reached to ``PROGRESS/rank<R>`` (:func:`write_progress`) and touches
``PROGRESS/pulse<R>`` every second from a thread (:func:`start_pulse`). The launcher watches both
(:class:`_Watch`): a rank that stays behind the others' step (:func:`behind`: it hangs while they wait in
a collective) or whose pulse stops (its whole process stopped: SIGSTOP, swapped out) for the collective
timeout is named frozen, and the launch is killed then, without torchrun's 30 s SIGTERM grace for a rank
that cannot answer. When a collective timed out first, the ranks left behind are named the same way.

Several nodes: the same entry point under torchrun's rendezvous (docs/gpu.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

RANK_ENTRY = "cooplab.fsdp_rank"
PARENT_ENV = "COOPLAB_TORCHRUN_PARENT"
AGENT_ENV = "COOPLAB_TORCHRUN_AGENT"
"""The pid of the torchrun that :func:`main` runs, set for its ranks: a rank whose parent is no longer it
(torchrun died before the rank asked to die with it) exits at once (:func:`rank_dies_with_torchrun`)."""
"""The pid of the process that launched torchrun; torchrun exits at once when it is already gone."""
_PR_SET_PDEATHSIG = 1
OUTPUT_GRACE_S = 10.0
"""How long a launch that ended waits for the ranks' last lines."""


@dataclass(frozen=True)
class LaunchResult:
    """How a launch ended: torchrun's exit status, and when it failed, the first failed rank and why."""

    returncode: int
    failed_rank: int | None = None
    cause: str = ""

    def describe(self) -> str:
        if self.returncode == 0:
            return "every rank ended well"
        who = f"rank {self.failed_rank}" if self.failed_rank is not None else "a rank"
        return f"{who} failed: {self.cause or f'torchrun exited with {self.returncode}'}"


def ranks_of(fsdp_ranks: int | None) -> int:
    """The ranks a run launches: ``fsdp_ranks``, else one per visible GPU (one on a CPU-only machine)."""
    if fsdp_ranks:
        return fsdp_ranks
    import torch

    return max(1, torch.cuda.device_count())


def rank_threads(nproc: int, environ: Mapping[str, str]) -> str | None:
    """Each rank's ``OMP_NUM_THREADS``: the launcher's (the worker and ``cooplab train`` set it from
    ``COOPLAB_JOB_THREADS`` or the cores, docs/cpu_threads.md) split among the ranks of this machine, at
    least 1; None when the launcher has none (torchrun then gives each rank 1)."""
    value = environ.get("OMP_NUM_THREADS", "").strip()
    if not value.isdigit() or int(value) < 1:
        return None
    return str(max(1, int(value) // nproc))


def torchrun_command(nproc: int, args: Sequence[str]) -> list[str]:
    """``python -m jobs.torchrun --standalone --nproc_per_node=N -m cooplab.fsdp_rank ARGS`` (torchrun's
    own command line, run through this module so that it dies with its launcher)."""
    return [sys.executable, "-m", "jobs.torchrun", "--standalone", f"--nproc_per_node={nproc}",
            "-m", RANK_ENTRY, *args]


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux; elsewhere nothing),
    and exit at once when the parent (``parent``, else the one at the call) is already gone."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)  # the launcher died before the request was made: nobody will read our lines


_ENTRY = re.compile(r"^\[\d+\]:\s*$")
_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
_TRACE = re.compile(r"^\s*traceback\s*:\s*(.*)$")


def _entries(lines: Sequence[str]) -> list[tuple[int, int | None, str]]:
    """``(rank, exit code, last line of its traceback)`` of each ``[i]:`` entry of a torchrun report."""
    out: list[tuple[int, int | None, str]] = []
    rank: int | None = None
    code: int | None = None
    trace: list[str] = []
    tracing = False

    def close() -> None:
        if rank is not None:
            last = next((t.strip() for t in reversed(trace) if t.strip() and not set(t.strip()) <= set("^~")), "")
            out.append((rank, code, last))

    for line in lines:
        if _ENTRY.match(line) or line.startswith(("---", "===")):
            close()
            rank, code, trace, tracing = None, None, [], False
        elif tracing:
            trace.append(line)
        elif m := _RANK.match(line):
            rank = int(m.group(1))
        elif m := _EXIT.match(line):
            code = int(m.group(1))
        elif m := _TRACE.match(line):
            trace, tracing = [m.group(1)], True
    close()
    return out


_AFTERMATH = ("Connection reset by peer", "Connection closed by peer", "Connection refused", "Broken pipe",
              "Signal 15 (SIGTERM)")
"""What a rank reports when another rank died under it (its peer's socket closed) or torchrun stopped it:
never the cause while another rank failed by itself."""


def failure_of(lines: Sequence[str]) -> tuple[int | None, str]:
    """The rank that failed first and its cause (the last line of its traceback) from torchrun's report,
    followed by the other ranks that ended badly. torchrun's ``Root Cause`` is the first error it saw;
    a rank whose collective broke because its peer died can report before the dead rank is noticed, so
    an error that is only the aftermath of another's death (:data:`_AFTERMATH`) yields to a rank that
    failed by itself (killed, its own exception)."""
    root_at = next((i for i, line in enumerate(lines) if line.startswith("Root Cause")), None)
    if root_at is None:
        return None, ""
    failures_at = next((i for i in range(root_at, -1, -1) if lines[i].startswith("Failures:")), root_at)
    root = _entries(lines[root_at:])
    if not root:
        return None, ""
    entries = [root[0], *(e for e in _entries(lines[failures_at:root_at]) if e[0] != root[0][0])]
    first = next((e for e in entries if not any(m in e[2] for m in _AFTERMATH)), entries[0])
    rank, code, why = first
    cause = f"exit code {code}" if code is not None else "failed"
    if why and why != "<N/A>":
        cause += f" ({why})"
    if "Timed out" in why or "timed out" in why:
        cause += "; a collective timed out: another rank stopped answering (COOPLAB_COLLECTIVE_TIMEOUT_S)"
    others = [f"rank {r} exit code {c}" for r, c, _ in entries if r != rank]
    if others:
        cause += "; then " + ", ".join(others)
    return rank, cause


# ------------------------------------------------------------------------------ progress of the ranks


def write_progress(folder: Path, rank: int, boundaries: int) -> None:
    """Record that ``rank`` reached its ``boundaries``-th step boundary (before the collective there)."""
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rank{rank}").write_text(str(boundaries), encoding="utf-8")


def start_pulse(folder: Path, rank: int, interval_s: float = 1.0) -> None:
    """Touch ``folder/pulse<R>`` every ``interval_s`` seconds from a daemon thread: a rank stopped whole
    (SIGSTOP, swapped out) stops pulsing, while one waiting in a collective goes on."""
    path, pid = folder / f"pulse{rank}", str(os.getpid())

    def pulse() -> None:
        while True:
            with contextlib.suppress(OSError):
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(pid, encoding="utf-8")
            time.sleep(interval_s)

    threading.Thread(target=pulse, name=f"rank-pulse-{rank}", daemon=True).start()


def read_pulses(folder: Path) -> dict[int, tuple[float, int]]:
    """``{rank: (modification time of its pulse file, the rank's pid)}``."""
    out: dict[int, tuple[float, int]] = {}
    for path in folder.glob("pulse*") if folder.is_dir() else ():
        with contextlib.suppress(OSError, ValueError):
            out[int(path.name.removeprefix("pulse"))] = (path.stat().st_mtime, int(path.read_text(encoding="utf-8")))
    return out


def _running(pid: int) -> bool:
    """True while ``pid`` is a live process (not gone, not a zombie): a rank that ended pulses no more."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def read_progress(folder: Path) -> dict[int, int]:
    """``{rank: step boundaries reached}`` of the ranks that wrote their progress into ``folder``."""
    out: dict[int, int] = {}
    for path in folder.glob("rank*") if folder.is_dir() else ():
        with contextlib.suppress(OSError, ValueError):
            out[int(path.name.removeprefix("rank"))] = int(path.read_text(encoding="utf-8"))
    return out


def behind(progress: dict[int, int], nproc: int) -> list[int]:
    """The ranks that reached fewer step boundaries than the furthest one (a rank that wrote nothing
    reached none); empty when they are all level."""
    reached = [progress.get(r, 0) for r in range(nproc)]
    top = max(reached, default=0)
    return [r for r, n in enumerate(reached) if n < top]


# ------------------------------------------------------------------------------------------ launching


def _kill_tree(proc: subprocess.Popen[str], ranks: set[int], *, wait: bool = True) -> None:
    """SIGKILL torchrun and every rank it started (``ranks``: the pids seen, plus its children now)."""
    import psutil

    with contextlib.suppress(psutil.Error):
        ranks = ranks | {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    for pid in (*sorted(ranks), proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if wait:
        proc.wait()


class _Watch:
    """A thread that names a rank frozen once it has stayed behind the others (:func:`behind`) for
    ``after_s`` seconds, and then kills the launch (torchrun and every rank)."""

    def __init__(self, folder: Path, nproc: int, after_s: float, kill: Callable[[], None],
                 interval_s: float = 0.5) -> None:
        self.folder, self.nproc, self.after_s, self.kill, self.interval_s = folder, nproc, after_s, kill, interval_s
        self.frozen: list[int] = []
        self.silent: list[int] = []  # the frozen ranks whose pulse stopped
        self.reached: dict[int, int] = {}
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="torchrun-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        since: dict[int, float] = {}  # rank: when it was first seen behind the others
        pulses: dict[int, tuple[float, float]] = {}  # rank: (its pulse file's time, when that was first seen)
        while not self._halt.wait(self.interval_s):
            now = time.monotonic()
            self.reached = read_progress(self.folder)
            late = behind(self.reached, self.nproc) if self.reached else []
            since = {r: since.get(r, now) for r in late}
            stuck = {r for r, t in since.items() if now - t >= self.after_s}
            for rank, (mtime, pid) in read_pulses(self.folder).items():
                if pulses.get(rank, (None, 0.0))[0] != mtime:
                    pulses[rank] = (mtime, now)
                elif now - pulses[rank][1] >= self.after_s and _running(pid):
                    stuck.add(rank)
                    self.silent.append(rank)
            if stuck:
                self.frozen = sorted(stuck)
                self.kill()
                return

    def close(self) -> None:
        self._halt.set()
        self._thread.join()


def launch(nproc: int, args: Sequence[str], *, echo: Callable[[str], None] = print,
           env: dict[str, str] | None = None, cwd: str | Path | None = None,
           progress: Path | None = None, frozen_after_s: float | None = None) -> LaunchResult:
    """Run the ranks and stream their lines to ``echo`` until torchrun exits (see the module docstring).
    ``progress``: the folder the ranks write their step boundaries to (``COOPLAB_FSDP_PROGRESS``), read
    to name a frozen rank when a collective timed out; with ``frozen_after_s`` too, a rank that stays
    behind the others that long is named frozen and the launch is killed without waiting for torchrun
    (which gives a frozen rank 30 s to answer its SIGTERM). Whatever ``echo`` raises kills every rank
    first. The ranks split the launcher's OpenMP threads (:func:`rank_threads`) unless ``env`` sets them."""
    import psutil

    given = env or {}
    env = {**os.environ, **given, PARENT_ENV: str(os.getpid())}
    threads = rank_threads(nproc, env)
    if threads is not None and "OMP_NUM_THREADS" not in given:  # the ranks share the launcher's cores
        env["OMP_NUM_THREADS"] = threads
    env.setdefault("PYTHONUNBUFFERED", "1")
    if progress is not None:
        env["COOPLAB_FSDP_PROGRESS"] = str(progress)
        shutil.rmtree(progress, ignore_errors=True)  # an earlier launch's marks into this folder
    tail: list[str] = []
    ranks: set[int] = set()
    errors: list[BaseException] = []
    proc = subprocess.Popen(torchrun_command(nproc, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=cwd, bufsize=1)

    def read() -> None:  # the ranks' lines, until every process holding the pipe closed it
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                line = line.rstrip("\n")
                if len(ranks) < nproc:  # the ranks' pids, so that they can be killed once torchrun is gone
                    with contextlib.suppress(psutil.Error):
                        ranks.update(c.pid for c in psutil.Process(proc.pid).children())
                echo(line)
                tail.append(line)
                del tail[:-400]
        except BaseException as exc:  # echo failed: nobody reads the ranks any more
            errors.append(exc)
            _kill_tree(proc, ranks, wait=False)

    reader = threading.Thread(target=read, name="torchrun-lines", daemon=True)
    reader.start()
    watch = None
    if progress is not None and frozen_after_s is not None:
        watch = _Watch(progress, nproc, frozen_after_s, lambda: _kill_tree(proc, ranks, wait=False))
    try:
        code = proc.wait()
        # the last lines; a process the ranks started that still holds the pipe is not waited for
        reader.join(timeout=OUTPUT_GRACE_S)
    except BaseException:
        _kill_tree(proc, ranks)
        raise
    finally:
        if watch is not None:
            watch.close()
    if errors:
        raise errors[0]
    if watch is not None and watch.frozen:
        names = ", ".join(str(r) for r in watch.frozen)
        levels = ", ".join(f"rank {r} {watch.reached.get(r, 0)}" for r in range(nproc))
        how = ("its process stopped running (no pulse)" if watch.silent else "it stayed behind the others' step")
        return LaunchResult(code or 1, watch.frozen[0],
                            f"stopped making progress: rank {names} froze ({how} for {frozen_after_s:g} s, "
                            f"COOPLAB_COLLECTIVE_TIMEOUT_S; step boundaries reached: {levels}); every rank was killed")
    if code == 0:
        return LaunchResult(0)
    rank, cause = failure_of(tail)
    if "a collective timed out" in cause and progress is not None:
        frozen = behind(read_progress(progress), nproc)
        if frozen:
            names = ", ".join(str(r) for r in frozen)
            return LaunchResult(code, frozen[0], f"stopped making progress: rank {names} did not reach the step "
                                f"the others waited at, and their collective timed out; first report: rank {rank} "
                                f"{cause}")
    return LaunchResult(code, rank, cause)


def rank_dies_with_torchrun() -> None:
    """Called first by a rank: it dies with its torchrun, and exits at once when the torchrun that started it
    (:data:`AGENT_ENV`; a bare ``torchrun`` names none, and then only the death request is made) is gone."""
    agent = os.environ.get(AGENT_ENV)
    die_with_parent(signal.SIGKILL, int(agent) if agent else None)


def main() -> int:
    """torchrun itself, dying with the process that launched it (:data:`PARENT_ENV`)."""
    parent = os.environ.get(PARENT_ENV)
    die_with_parent(signal.SIGKILL, int(parent) if parent else None)
    os.environ[AGENT_ENV] = str(os.getpid())  # torchrun's agent runs in this process and starts the ranks
    from torch.distributed.run import main as torchrun

    torchrun()
    return 0


if __name__ == "__main__":
    sys.exit(main())
