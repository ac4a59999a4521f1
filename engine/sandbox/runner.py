"""Run one untrusted Python program in a separate, limited process.

The calling process never executes the program. It writes the program to a fresh temporary
directory, starts ``_child.py`` (which sets the limits and drops privileges) with a minimal
environment, waits at most ``timeout_s`` and then kills the whole process group and, when a
dedicated sandbox uid is used, every process that uid still owns (a fork bomb's orphans too).

When the caller is root, each concurrent sandbox runs as its own unprivileged uid, so RLIMIT_NPROC
(which root ignores) counts only that sandbox's processes and file permissions keep it out of
everything it does not own. Otherwise it runs as the caller with NPROC set above the caller's
current process count. Network: a fresh network namespace (``unshare --net``) when the system
allows it, and sockets blocked inside the interpreter in every case.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path

from engine.sandbox.limits import SandboxLimits, SandboxResult

_CHILD = str(Path(__file__).with_name("_child.py"))
_VIOLATION_PREFIX = "SANDBOX-VIOLATION:"
_UID_BASE = 1_500_000_000
_SLOTS_PER_PROCESS = 256

_slot_lock = threading.Lock()
_free_slots: list[int] = list(range(_SLOTS_PER_PROCESS))


def _minimal_env(workdir: str) -> dict[str, str]:
    """The only environment the program sees: no inherited variables, so no secrets."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _world_readable_dir(path: str) -> bool:
    """Whether any user can list and read ``path`` (every parent directory searchable)."""
    current = Path(path).resolve()
    if not current.is_dir() or not (current.stat().st_mode & stat.S_IROTH and current.stat().st_mode & stat.S_IXOTH):
        return False
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in current.parents)


@lru_cache(maxsize=1)
def sandbox_interpreter() -> tuple[str, bool]:
    """The Python that runs sandboxed programs, and whether its standard library is world-readable.

    The current interpreter when an unprivileged user can read its standard library; otherwise a
    system interpreter of the same version that can (e.g. when Python lives under ``/root``).
    Without one, the current interpreter is used and common modules are imported before privileges
    are dropped.
    """
    if _world_readable_dir(sysconfig.get_paths()["stdlib"]):
        return sys.executable, True
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin", "/bin"):
        candidate = Path(folder) / version
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            continue
        try:
            probe = subprocess.run(
                [str(candidate), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin"},
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and _world_readable_dir(probe.stdout.strip()):
            return str(candidate), True
    return sys.executable, False


@lru_cache(maxsize=1)
def network_namespace_available() -> bool:
    """Whether ``unshare --net`` works here (root or unprivileged user namespaces)."""
    tool = shutil.which("unshare")
    if tool is None:
        return False
    try:
        done = subprocess.run([tool, "--net", "--", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _acquire_uid() -> tuple[int | None, int | None]:
    """A dedicated uid for one sandbox when running as root, else ``(None, None)``."""
    if os.geteuid() != 0:
        return None, None
    with _slot_lock:
        if not _free_slots:
            raise RuntimeError(f"more than {_SLOTS_PER_PROCESS} concurrent sandboxes in one process")
        slot = _free_slots.pop(0)
    # Spread processes apart so two trainers on one machine do not share sandbox uids.
    uid = _UID_BASE + (os.getpid() % 1_000_000) * _SLOTS_PER_PROCESS + slot
    return uid, slot


def _release_slot(slot: int | None) -> None:
    if slot is not None:
        with _slot_lock:
            _free_slots.append(slot)


def _uid_pids(uid: int) -> list[int]:
    """Live (non-zombie) processes whose real uid is ``uid``."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="utf-8") as fh:
                state = ""
                for line in fh:
                    if line.startswith("State:"):
                        state = line.split()[1]
                    elif line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and state not in ("Z", "X"):
                            pids.append(int(name))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return pids


def kill_uid_processes(uid: int, *, rounds: int = 100) -> int:
    """SIGKILL every process owned by ``uid`` until none is left; return how many were killed."""
    killed = 0
    quiet_rounds = 0
    for _ in range(rounds):
        pids = _uid_pids(uid)
        if not pids:
            quiet_rounds += 1
            if quiet_rounds >= 2:
                break
            time.sleep(0.01)
            continue
        quiet_rounds = 0
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.005)
    return killed


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read_capped(path: Path, limit: int) -> str:
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    text = data[:limit].decode("utf-8", "replace")
    return text + ("\n[output truncated]" if len(data) > limit else "")


def run_python(
    code: str,
    *,
    limits: SandboxLimits | None = None,
    files: dict[str, str] | None = None,
    stdin: str | None = None,
) -> SandboxResult:
    """Run ``code`` as ``main.py`` in a sandbox and report what happened (never raises for its errors)."""
    limits = limits or SandboxLimits()
    uid, slot = _acquire_uid()
    gid = uid
    workdir = tempfile.mkdtemp(prefix="cooplab-sandbox-")
    private = tempfile.mkdtemp(prefix="cooplab-sandbox-io-")  # output files, outside the sandbox's reach
    try:
        root = Path(workdir)
        (root / "main.py").write_text(code, encoding="utf-8")
        for name, text in (files or {}).items():
            target = (root / name).resolve()
            if root.resolve() not in target.parents:
                raise ValueError(f"sandbox file {name!r} must stay inside the working directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if uid is not None:
            for path in [root, *root.rglob("*")]:
                os.chown(path, uid, gid)
            os.chmod(root, 0o700)
        return _execute(workdir, private, limits, uid, gid, stdin)
    finally:
        if uid is not None:
            kill_uid_processes(uid)
        _release_slot(slot)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)


def _execute(
    workdir: str, private: str, limits: SandboxLimits, uid: int | None, gid: int | None, stdin: str | None
) -> SandboxResult:
    config = {
        "workdir": workdir,
        "uid": uid,
        "gid": gid,
        "cpu_s": limits.cpu_seconds,
        "memory_mb": limits.memory_mb,
        "max_file_mb": limits.max_file_mb,
        "max_processes": limits.max_processes,
        "max_open_files": limits.max_open_files,
        "network": limits.network,
        "preload": [],
    }
    python = sys.executable
    if uid is not None:
        python, readable = sandbox_interpreter()
        if not readable:
            config["preload"] = list(limits.preload)
    argv = [python, "-I", "-B", _CHILD, json.dumps(config)]
    isolation = "allowed" if limits.network else "blocked"
    if not limits.network and network_namespace_available():
        argv = [shutil.which("unshare") or "unshare", "--net", "--", *argv]
        isolation = "namespace"
    out_path, err_path = Path(private) / "stdout", Path(private) / "stderr"
    started = time.monotonic()
    timed_out = False
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=_minimal_env(workdir),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            close_fds=True,
        )
        try:
            if stdin is not None:
                try:
                    proc.stdin.write(stdin.encode("utf-8"))
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            if uid is not None:
                kill_uid_processes(uid)
            proc.wait()
    duration = time.monotonic() - started
    cap = limits.max_file_mb * 1024 * 1024
    stdout = _read_capped(out_path, cap)
    stderr = _read_capped(err_path, cap)
    status, reason, violations = classify(proc.returncode, stderr, timed_out=timed_out, limits=limits)
    return SandboxResult(
        status=status,
        reason=reason,
        returncode=proc.returncode,
        stdout=stdout,
        stderr=stderr,
        duration_s=duration,
        network_isolation=isolation,
        violations=violations,
    )


def classify(
    returncode: int | None, stderr: str, *, timed_out: bool, limits: SandboxLimits
) -> tuple[str, str, tuple[str, ...]]:
    """Status, one-line reason and sandbox violations of a finished program (pure function)."""
    violations = tuple(
        line[len(_VIOLATION_PREFIX):].strip() for line in stderr.splitlines() if line.startswith(_VIOLATION_PREFIX)
    )
    if timed_out:
        return "timeout", f"wall-clock limit of {limits.timeout_s:g}s exceeded", violations
    if returncode == 0:
        return "ok", "exited normally", violations
    last = _last_error_line(stderr)
    if returncode is not None and returncode < 0:
        sig = -returncode
        if sig == signal.SIGXCPU:
            return "killed", f"CPU-time limit of {limits.cpu_seconds}s exceeded", violations
        if sig == signal.SIGXFSZ:
            return "killed", f"file-size limit of {limits.max_file_mb} MB exceeded", violations
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return "killed", f"killed by signal {name}", violations
    if "MemoryError" in last or "Cannot allocate memory" in stderr:
        return "error", f"memory limit of {limits.memory_mb} MB exceeded ({last})", violations
    if "[Errno 27]" in stderr or "File too large" in stderr:
        return "error", f"file-size limit of {limits.max_file_mb} MB exceeded ({last})", violations
    if "Resource temporarily unavailable" in stderr and ("fork" in stderr or "BlockingIOError" in stderr):
        return "error", f"process limit of {limits.max_processes} exceeded ({last})", violations
    if violations:
        return "blocked", f"sandbox rule: {violations[0]}", violations
    return "error", last or f"exited with code {returncode}", violations


def _last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith(_VIOLATION_PREFIX)]
    return lines[-1][:500] if lines else ""
