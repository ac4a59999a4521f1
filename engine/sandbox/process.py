"""One sandboxed guest process: its box of inputs, its identity, its start, its end.

A guest is ``bootstrap.py`` in a given role (``run``, ``serve`` or ``judge``) with the guest
scripts and its own inputs in a fresh folder (``/box`` inside, read-only). Standard output and
error go to files the guest cannot see, capped by the file-size limit. Leaving the ``with`` block
kills the whole process tree (process group, PID namespace, and the dedicated uid as root) and
removes every file of the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from engine.sandbox.boundary import BOX, WORK, boundary, unisolated_interpreter
from engine.sandbox.identity import dedicated_uid, own_task_count
from engine.sandbox.limits import SandboxLimits

GUEST_DIR = Path(__file__).with_name("guest")
GUEST_SCRIPTS = ("bootstrap.py", "plain.py", "serve.py", "judge.py")
NAMESPACE_INIT = 1  # bubblewrap's first process in the namespace counts toward the process limit
TEMP_PREFIX = "cooplab-sandbox-"


def _read_capped(path: Path, limit: int) -> str:
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    text = data[:limit].decode("utf-8", "replace")
    return text + ("\n[output truncated]" if len(data) > limit else "")


class Guest(contextlib.AbstractContextManager):
    """A sandboxed process in ``role`` with ``inputs`` (file name -> text) in its box."""

    def __init__(self, role: str, inputs: dict[str, str], limits: SandboxLimits,
                 files: dict[str, str] | None = None) -> None:
        self.role, self.inputs, self.limits, self.files = role, inputs, limits, files or {}
        self.boundary = boundary(limits.unisolated_allowed)  # raises SandboxUnavailable before anything is created
        self.isolation = "bubblewrap" if self.boundary is not None else "UNSAFE-unisolated"
        self._stack = contextlib.ExitStack()
        self.proc: subprocess.Popen[bytes] | None = None
        self._info_read: int | None = None

    def __enter__(self) -> Guest:
        try:
            self.uid = self._stack.enter_context(dedicated_uid())
            self.host = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
            self._stack.callback(shutil.rmtree, self.host, ignore_errors=True)
            self.box, self.work, self.private = self.host / "box", self.host / "work", self.host / "private"
            self._write_box()
            self.private.mkdir(mode=0o700)
            self.stdout_path, self.stderr_path = self.private / "stdout", self.private / "stderr"
        except BaseException:
            self._stack.close()
            raise
        return self

    def _write_box(self) -> None:
        self.box.mkdir()
        self.work.mkdir()
        for name in GUEST_SCRIPTS:
            shutil.copyfile(GUEST_DIR / name, self.box / name)
        for name, text in self.inputs.items():
            (self.box / name).write_text(text, encoding="utf-8")
        for name, text in self.files.items():
            target = (self.box / "files" / name).resolve()
            if (self.box / "files").resolve() not in target.parents:
                raise ValueError(f"sandbox file {name!r} must stay inside the working directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if self.uid is not None:
            for path in (self.host, self.box, self.work, *self.box.rglob("*")):
                os.chown(path, self.uid, self.uid)
        os.chmod(self.host, 0o711)  # the guest's uid may pass through, list nothing

    def _config(self, extra: dict) -> str:
        limits = self.limits
        isolated = self.boundary is not None
        nproc = limits.max_processes + (NAMESPACE_INIT if isolated else 0)
        if self.uid is None and not isolated:
            nproc += own_task_count()  # the limit counts every process of the caller's user
        return json.dumps({
            "role": self.role, "box": BOX if isolated else str(self.box), "work": WORK if isolated else str(self.work),
            "cpu_s": limits.cpu_seconds, "memory_mb": limits.memory_mb, "max_file_mb": limits.max_file_mb,
            "max_open_files": limits.max_open_files, "nproc": nproc, "audit_hook": limits.audit_hook,
            "network": limits.network, **extra,
        })

    def start(self, *, extra: dict | None = None, pass_fds: tuple[int, ...] = (), stdin: bool = False) -> None:
        config = self._config(extra or {})
        self._info_read = None
        filter_fd = None
        if self.boundary is not None:
            self._info_read, info_write = os.pipe()
            self._stack.callback(os.close, self._info_read)
            filter_fd = self.boundary.seccomp_fd(network=self.limits.network)
            pass_fds = (*pass_fds, info_write, filter_fd)
            argv = self.boundary.argv(str(self.box), tmpfs_mb=self.limits.tmpfs_mb, network=self.limits.network,
                                      config=config, seccomp_fd=filter_fd, info_fd=info_write)
            cwd = "/"
        else:
            argv = [unisolated_interpreter(), "-I", "-S", "-B", str(self.box / "bootstrap.py"), config]
            cwd = str(self.work)
        extra_groups: list[int] | None = [] if self.uid is not None else None  # None: the default, as user/group
        try:
            with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
                self.proc = subprocess.Popen(
                    argv, cwd=cwd, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                    stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, close_fds=True, pass_fds=pass_fds,
                    user=self.uid, group=self.uid, extra_groups=extra_groups,
                )
        finally:
            if self._info_read is not None:
                os.close(info_write)
            if filter_fd is not None:
                os.close(filter_fd)
        self.started = time.monotonic()
        self._stack.callback(self.kill)

    @property
    def running(self) -> subprocess.Popen[bytes]:
        """The guest's process (after :meth:`start`)."""
        if self.proc is None:
            raise RuntimeError("the guest has not been started; call start() first")
        return self.proc

    def write_stdin(self, text: str) -> None:
        stdin = self.running.stdin
        if stdin is None:
            raise RuntimeError("the guest was started without stdin; call start(stdin=True)")
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin.write(text.encode("utf-8"))
            stdin.close()

    def wait(self, timeout_s: float) -> bool:
        """Wait for the guest to exit; ``True`` when it ran out of time (then it is killed)."""
        pidfd = os.pidfd_open(self.running.pid)
        try:  # woken by the exit itself, not by polling
            exited, _, _ = select.select([pidfd], [], [], max(0.0, timeout_s))
        finally:
            os.close(pidfd)
        if exited:
            self.running.wait()
            return False
        self.kill()
        return True

    def kill(self) -> None:
        """End the guest and everything it started; return once all of it is gone."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self._end_namespace()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def _end_namespace(self) -> None:
        """Kill the PID namespace's first process: the kernel then kills every other one in it, and
        the first process is reported dead only after they are all gone."""
        init_pid = self._namespace_pid()
        if init_pid is None:
            return
        try:
            pidfd = os.pidfd_open(init_pid)
        except OSError:
            return  # already gone
        try:
            if self._parent_of(init_pid) == self.running.pid:  # the pidfd pins it: no pid reuse after this
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                select.select([pidfd], [], [], 5.0)
        finally:
            os.close(pidfd)

    @staticmethod
    def _parent_of(pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                return int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None

    def _namespace_pid(self) -> int | None:
        if self._info_read is None:
            return None
        ready, _, _ = select.select([self._info_read], [], [], 0)
        if not ready:
            return None  # bubblewrap has not created the namespace yet
        try:
            info = json.loads(os.read(self._info_read, 65536).decode("utf-8", "replace") or "{}")
        except (OSError, ValueError):
            return None
        pid = info.get("child-pid")
        return pid if isinstance(pid, int) and pid > 1 else None

    @property
    def duration_s(self) -> float:
        return time.monotonic() - self.started

    def output(self) -> tuple[str, str]:
        cap = self.limits.max_file_mb * 1024 * 1024
        return _read_capped(self.stdout_path, cap), _read_capped(self.stderr_path, cap)

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
