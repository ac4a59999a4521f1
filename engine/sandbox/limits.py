"""Limits of one sandboxed run and the result it reports."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed program.

    ``timeout_s`` is the wall-clock limit; ``cpu_s`` the CPU-time limit of each process (defaults
    to the wall-clock limit rounded up); ``memory_mb`` the address-space limit (RLIMIT_AS);
    ``max_processes`` the process/thread count of the sandbox user (RLIMIT_NPROC); ``max_file_mb``
    the largest file the program may write, which also caps its captured stdout and stderr;
    ``tmpfs_mb`` the size of its private writable ``/tmp``. ``network`` True shares the host's
    network (never for model-written code). ``audit_hook`` keeps the in-interpreter guard as defence
    in depth; the OS boundary holds without it (the attack tests turn it off to show that).
    ``unisolated_allowed`` carries the operator's UNSAFE permission to run without OS isolation where
    bubblewrap cannot be used (``unisolated_sandbox`` of :class:`engine.permissions.operator.OperatorPermissions`;
    :func:`engine.sandbox.boundary.boundary`); False refuses such code.
    """

    timeout_s: float = 5.0
    cpu_s: int | None = None
    memory_mb: int = 512
    max_processes: int = 32
    max_file_mb: int = 8
    max_open_files: int = 64
    tmpfs_mb: int = 16
    network: bool = False
    audit_hook: bool = True
    unisolated_allowed: bool = False

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.cpu_s is not None and self.cpu_s < 1:
            raise ValueError(f"cpu_s must be >= 1 second, got {self.cpu_s}")
        if self.memory_mb < 64:
            raise ValueError(f"memory_mb must be >= 64 (the interpreter needs it), got {self.memory_mb}")
        if self.max_processes < 1:
            raise ValueError(f"max_processes must be >= 1, got {self.max_processes}")
        if self.max_file_mb < 1:
            raise ValueError(f"max_file_mb must be >= 1, got {self.max_file_mb}")
        if self.tmpfs_mb < 1:
            raise ValueError(f"tmpfs_mb must be >= 1, got {self.tmpfs_mb}")

    @property
    def cpu_seconds(self) -> int:
        return self.cpu_s if self.cpu_s is not None else max(1, int(self.timeout_s + 0.999))


@dataclass(frozen=True)
class SandboxResult:
    """What happened to one sandboxed program.

    ``status`` is ``ok`` (exit code 0), ``error`` (an exception or a non-zero exit), ``timeout``
    (wall clock), ``killed`` (a signal, e.g. the CPU limit) or ``blocked`` (a sandbox rule stopped
    it). ``reason`` says why in one line; ``violations`` lists the rules the program hit;
    ``isolation`` is ``bubblewrap`` or ``UNSAFE-unisolated``.
    """

    status: str
    reason: str
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    isolation: str = "bubblewrap"
    violations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.status == "ok"
