"""How a finished program's exit is turned into a status and a one-line reason (pure function)."""

from __future__ import annotations

import signal

import pytest

from engine.sandbox import SandboxLimits, classify

LIMITS = SandboxLimits(timeout_s=3, memory_mb=128, max_processes=4, max_file_mb=2)


@pytest.mark.parametrize(
    ("returncode", "stderr", "timed_out", "status", "reason_part"),
    [
        (0, "", False, "ok", "exited normally"),
        (None, "", True, "timeout", "wall-clock limit of 3s"),
        (-signal.SIGXCPU, "", False, "killed", "CPU-time limit of 3s"),
        (-signal.SIGKILL, "", False, "killed", "SIGKILL"),
        (1, "Traceback...\nMemoryError\n", False, "error", "memory limit of 128 MB"),
        (1, "OSError: [Errno 27] File too large\n", False, "error", "file-size limit of 2 MB"),
        (1, "BlockingIOError: [Errno 11] Resource temporarily unavailable\n", False, "error", "process limit of 4"),
        (1, "SANDBOX-VIOLATION: network access (socket.__new__) is not allowed\nPermissionError: x\n", False,
         "blocked", "network access"),
        (1, "Traceback\nValueError: bad input\n", False, "error", "ValueError: bad input"),
        (3, "", False, "error", "exited with code 3"),
    ],
)
def test_classify(returncode, stderr, timed_out, status, reason_part):
    got_status, reason, _ = classify(returncode, stderr, timed_out=timed_out, limits=LIMITS)
    assert got_status == status
    assert reason_part in reason


def test_violations_are_listed_even_when_the_program_timed_out():
    _, _, violations = classify(
        None, "SANDBOX-VIOLATION: starting programs (os.system) is not allowed\n", timed_out=True, limits=LIMITS
    )
    assert violations == ("starting programs (os.system) is not allowed",)


@pytest.mark.parametrize(
    "kwargs", [{"timeout_s": 0}, {"cpu_s": 0}, {"memory_mb": 8}, {"max_processes": 0}, {"max_file_mb": 0}]
)
def test_invalid_limits_are_rejected(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        SandboxLimits(**kwargs)
