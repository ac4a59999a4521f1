"""The OS boundary around sandboxed programs: bubblewrap namespaces over a minimal read-only root.

Every sandboxed process runs in its own user, PID, network, IPC, UTS and mount namespaces, as
uid 65534 inside, with no new privileges, a new session, and death with its parent. Its root holds
only the interpreter, its standard library (``site-packages`` hidden) and the shared libraries they
load, plus ``/box`` (the run's own inputs, read-only), a private size-limited ``/tmp`` (the
working directory), a private ``/proc`` and a minimal ``/dev``: no project source, no datasets, no
data directory, no sockets. The PID namespace ends every descendant when the program ends. A
system-call filter (:mod:`engine.sandbox.seccomp`, installed by bubblewrap in the program and in
the namespace's first process) refuses the calls that reach kernel code the namespaces do not
need: ``ptrace``, new namespaces, mounts, BPF, ``io_uring``, keys, modules, and sockets of every
family but ``AF_UNIX`` (``AF_INET``/``AF_INET6`` too when the sandbox shares the network). The namespace's
first process (bubblewrap, same uid) is hidden behind an empty read-only ``/proc/1``.

It fails closed: when bubblewrap is missing, cannot create the namespaces or cannot install the
filter (a probe checks that a program inside runs under it), code is refused with
:class:`SandboxUnavailable`, unless the caller's limits carry the operator's UNSAFE permission
(``SandboxLimits(unisolated_allowed=True)``, from ``unisolated_sandbox`` of
:class:`engine.permissions.operator.OperatorPermissions`): resource limits, a separate uid as root and the
in-interpreter audit hook only.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.sandbox.identity import dedicated_uid
from engine.sandbox.seccomp import SeccompUnsupported, filter_program

log = logging.getLogger(__name__)

INSIDE_UID = 65534
BOX = "/box"
WORK = "/tmp"
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
# Extension modules whose libraries the sandbox root carries (others import nothing extra).
_DYNLOAD_PREFIXES = ("_decimal", "_hashlib", "_bz2", "_lzma", "zlib", "pyexpat", "_elementtree", "_uuid",
                     "_json", "math", "cmath", "array", "_struct", "select", "_posixsubprocess", "binascii",
                     "_random", "_bisect", "_heapq", "_datetime", "_statistics", "unicodedata", "_contextvars",
                     "fcntl", "resource", "_blake2", "_sha", "_md5")


class SandboxUnavailable(RuntimeError):
    """Isolation cannot be set up here, so no model-written code may run."""


@dataclass(frozen=True)
class Boundary:
    """How to start an isolated interpreter here: bubblewrap, the interpreter, the root's binds."""

    bwrap: str
    interpreter: str
    binds: tuple[tuple[str, str], ...]  # (host path, path inside), read-only
    hidden: tuple[str, ...]  # folders inside the binds covered by an empty tmpfs
    seccomp: bytes  # the compiled system-call filter
    seccomp_network: bytes  # the same, allowing internet sockets, for a sandbox that shares the network

    def seccomp_fd(self, *, network: bool = False) -> int:
        """A pipe's read end holding the filter (the one for ``network``), for ``--seccomp`` (the caller
        passes and closes it)."""
        read, write = os.pipe()
        try:
            os.write(write, self.seccomp_network if network else self.seccomp)  # far below a pipe's buffer
        finally:
            os.close(write)
        return read

    def argv(self, box: str, *, tmpfs_mb: int, network: bool, config: str, seccomp_fd: int,
             info_fd: int | None = None) -> list[str]:
        """The bubblewrap command line that runs ``bootstrap.py`` from ``box`` with ``config``, under
        the filter that ``seccomp_fd`` (from :meth:`seccomp_fd`) holds.

        With ``info_fd``, bubblewrap writes the host pid of the namespace's first process there.
        """
        args = [self.bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
                "--hostname", "sandbox", "--die-with-parent", "--new-session", "--disable-userns",
                "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", WORK,
                "--setenv", "LANG", "C.UTF-8"]
        if not network:
            args.append("--unshare-net")
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        args += ["--seccomp", str(seccomp_fd)]
        for source, target in self.binds:
            args += ["--ro-bind", source, target]
        for folder in self.hidden:
            args += ["--tmpfs", folder]
        # /proc/1 is bubblewrap's own first process (same uid): an empty read-only folder covers it,
        # so the program cannot open its memory (/proc/1/mem) or anything else of it
        args += ["--proc", "/proc", "--tmpfs", "/proc/1", "--remount-ro", "/proc/1",
                 "--dev", "/dev", "--remount-ro", "/dev",
                 "--size", str(tmpfs_mb * 1024 * 1024), "--tmpfs", WORK, "--ro-bind", box, BOX,
                 "--remount-ro", "/", "--chdir", WORK, "--", self.interpreter, "-I", "-S", "-B",
                 f"{BOX}/bootstrap.py", config]
        return args


def _readable_by_anyone(path: Path) -> bool:
    """Whether any user can read ``path`` (a file or folder) and traverse every parent folder."""
    try:
        mode = path.stat().st_mode
        if not mode & stat.S_IROTH or (path.is_dir() and not mode & stat.S_IXOTH):
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in path.resolve().parents)
    except OSError:
        return False


def _stdlib_of(interpreter: str) -> str | None:
    if os.path.realpath(interpreter) == os.path.realpath(getattr(sys, "_base_executable", sys.executable)):
        return sysconfig.get_paths()["stdlib"]
    try:
        done = subprocess.run([interpreter, "-I", "-S", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                              capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _candidate_interpreters() -> list[str]:
    own = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = [f"{folder}/{version}" for folder in ("/usr/bin", "/usr/local/bin", "/bin")]
    return [own, *(p for p in system if os.path.isfile(p) and os.path.realpath(p) != own)]


@lru_cache(maxsize=1)
def _choose_interpreter() -> tuple[str, str]:
    """An interpreter and its standard library that the sandbox's outer user can read."""
    as_root = os.geteuid() == 0
    for interpreter in _candidate_interpreters():
        stdlib = _stdlib_of(interpreter)
        if stdlib is None:
            continue
        if not as_root or (_readable_by_anyone(Path(interpreter)) and _readable_by_anyone(Path(stdlib))):
            return os.path.realpath(interpreter), stdlib
    raise SandboxUnavailable(
        f"no Python {sys.version_info.major}.{sys.version_info.minor} interpreter that an unprivileged user can "
        "read (the sandbox runs as one): install the distribution's python3 of the same version "
        "(Debian: apt-get install python3-minimal) or install Python outside a private folder such as /root"
    )


def _shared_libraries(paths: list[str]) -> dict[str, str]:
    """Inside path -> host file of every shared library (and the loader) that ``paths`` link."""
    ldd = shutil.which("ldd") or "/usr/bin/ldd"
    found: dict[str, str] = {}
    for path in paths:
        try:
            out = subprocess.run([ldd, path], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"cannot list the libraries of {path} with ldd: {exc}") from exc
        for line in out.splitlines():
            match = re.search(r"(/\S+)\s+\(0x", line)
            if match:
                found[match.group(1)] = os.path.realpath(match.group(1))
    return found


def _root_binds(interpreter: str, stdlib: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    dynload = Path(stdlib) / "lib-dynload"
    linked = [interpreter]
    if dynload.is_dir():
        linked += [str(p) for p in sorted(dynload.glob("*.so")) if p.name.startswith(_DYNLOAD_PREFIXES)]
    libraries = _shared_libraries(linked)
    binds = [(interpreter, interpreter), (stdlib, stdlib)]
    binds += [(host, inside) for inside, host in sorted(libraries.items()) if not inside.startswith(stdlib + "/")]
    hidden = tuple(str(Path(stdlib) / name) for name in ("site-packages", "dist-packages")
                   if (Path(stdlib) / name).is_dir())
    return tuple(binds), hidden


def _probe(boundary: Boundary) -> str:
    """Empty when a trivial program runs inside the boundary; else what went wrong."""
    import tempfile

    box = tempfile.mkdtemp(prefix="cooplab-sandbox-probe-")
    try:
        Path(box, "bootstrap.py").write_text(PROBE, encoding="utf-8")
        with dedicated_uid() as uid:
            if uid is not None:
                os.chown(box, uid, uid)
                os.chown(Path(box, "bootstrap.py"), uid, uid)
            filter_fd = boundary.seccomp_fd()
            argv = boundary.argv(box, tmpfs_mb=1, network=False, config="{}", seccomp_fd=filter_fd)
            kwargs: dict[str, Any] = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={},
                                      pass_fds=(filter_fd,), **kwargs)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{type(exc).__name__}: {exc}"
            finally:
                os.close(filter_fd)
        if done.returncode == 0 and done.stdout.strip() == "isolated, filtered":
            return ""
        if done.returncode == 0 and done.stdout.strip().startswith("isolated"):
            return "the system-call filter is not in force inside the sandbox"
        return (done.stderr.strip() or f"exit code {done.returncode}")[:500]
    finally:
        shutil.rmtree(box, ignore_errors=True)


# The probe: the program runs, and runs under a seccomp filter (mode 2 in its status).
PROBE = (
    "status = open('/proc/self/status').read()\n"
    "print('isolated, filtered' if 'Seccomp:\\t2' in status else 'isolated, unfiltered')\n"
)


@lru_cache(maxsize=1)
def _discover() -> Boundary | str:
    bwrap = shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.path.isfile(p)), None)
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    try:
        interpreter, stdlib = _choose_interpreter()
        binds, hidden = _root_binds(interpreter, stdlib)
        seccomp, seccomp_network = filter_program(), filter_program(network=True)
    except (SandboxUnavailable, SeccompUnsupported) as exc:
        return str(exc)
    boundary = Boundary(bwrap=bwrap, interpreter=interpreter, binds=binds, hidden=hidden, seccomp=seccomp,
                        seccomp_network=seccomp_network)
    problem = _probe(boundary)
    if problem == "the system-call filter is not in force inside the sandbox":
        return f"{problem} (bubblewrap {bwrap} ignored --seccomp)"
    if problem:
        return (f"bubblewrap cannot create the sandbox's namespaces here ({problem}); it needs user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0)")
    return boundary


def boundary(unisolated_allowed: bool = False) -> Boundary | None:
    """The isolation to use: a :class:`Boundary`, or ``None`` for the UNSAFE unisolated mode.

    Raises :class:`SandboxUnavailable` (naming what is missing) when isolation cannot be set up and
    the unsafe mode was not allowed (``unisolated_allowed``: the operator's UNSAFE permission; then
    a program runs with resource limits, as a separate uid when the caller is root, and behind the
    in-interpreter audit hook, which determined code can bypass: it may read what the caller's user
    can read and reach local services. Meant for machines that run only trusted models).
    """
    found = _discover()
    if isinstance(found, Boundary):
        return found
    if unisolated_allowed:
        log.warning("UNSAFE: sandboxed code runs without OS isolation (bubblewrap is unavailable: %s)", found)
        return None
    raise SandboxUnavailable(
        f"model-written code cannot run: {found}. CoopLab refuses to run it without isolation; an operator "
        "who accepts the risk may set COOPLAB_UNSAFE_SANDBOX_WITHOUT_ISOLATION=1 (docs/tasks.md)"
    )


def require_isolation(unisolated_allowed: bool = False) -> str:
    """Check now that code can run (raises :class:`SandboxUnavailable`); name the mode in use."""
    return "bubblewrap" if boundary(unisolated_allowed) is not None else "UNSAFE-unisolated"


def unisolated_interpreter() -> str:
    """The interpreter of the unsafe mode: one the sandbox's uid can read."""
    return _choose_interpreter()[0]
