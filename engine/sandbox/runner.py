"""Run one untrusted Python program in the sandbox and classify how it ended.

The calling process never executes the program: it writes it into a fresh box, starts it behind
the OS boundary (:mod:`engine.sandbox.boundary`), waits at most ``timeout_s`` and then kills the
whole process tree.
"""

from __future__ import annotations

import signal

from engine.sandbox.limits import SandboxLimits, SandboxResult
from engine.sandbox.process import Guest

_VIOLATION_PREFIX = "SANDBOX-VIOLATION:"


def run_python(
    code: str,
    *,
    limits: SandboxLimits | None = None,
    files: dict[str, str] | None = None,
    stdin: str | None = None,
) -> SandboxResult:
    """Run ``code`` as ``main.py`` in a sandbox and report what happened (never raises for its errors).

    ``files`` (name -> text) are copied into the program's working directory first. Raises
    :class:`~engine.sandbox.boundary.SandboxUnavailable` when isolation cannot be set up.
    """
    limits = limits or SandboxLimits()
    with Guest("run", {"main.py": code}, limits, files=files) as guest:
        guest.start(stdin=stdin is not None)
        if stdin is not None:
            guest.write_stdin(stdin)
        timed_out = guest.wait(limits.timeout_s)
        duration = guest.duration_s
        stdout, stderr = guest.output()
        returncode = guest.running.returncode
    status, reason, violations = classify(returncode, stderr, timed_out=timed_out, limits=limits)
    return SandboxResult(
        status=status, reason=reason, returncode=returncode, stdout=stdout, stderr=stderr,
        duration_s=duration, isolation=guest.isolation, violations=violations,
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
        return "killed", _signal_reason(-returncode, limits), violations
    if returncode is not None and returncode > 128 and not last:
        # bubblewrap reports a program killed by signal N as exit status 128 + N
        return "killed", _signal_reason(returncode - 128, limits), violations
    if "MemoryError" in last or "Cannot allocate memory" in stderr:
        return "error", f"memory limit of {limits.memory_mb} MB exceeded ({last})", violations
    if "[Errno 27]" in stderr or "File too large" in stderr:
        return "error", f"file-size limit of {limits.max_file_mb} MB exceeded ({last})", violations
    if "Resource temporarily unavailable" in stderr and ("fork" in stderr or "BlockingIOError" in stderr):
        return "error", f"process limit of {limits.max_processes} exceeded ({last})", violations
    if violations:
        return "blocked", f"sandbox rule: {violations[0]}", violations
    return "error", last or f"exited with code {returncode}", violations


def _signal_reason(sig: int, limits: SandboxLimits) -> str:
    if sig == signal.SIGXCPU:
        return f"CPU-time limit of {limits.cpu_seconds}s exceeded"
    if sig == signal.SIGXFSZ:
        return f"file-size limit of {limits.max_file_mb} MB exceeded"
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    return f"killed by signal {name}"


def _last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith(_VIOLATION_PREFIX)]
    return lines[-1][:500] if lines else ""
