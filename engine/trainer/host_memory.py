"""Freed host memory stays in the process while a team trains on the CPU.

A CPU training step allocates and frees the same large buffers every step: each weight's gradient,
the activations, the logits, the dense gradient of the embedding matrix. glibc's ``malloc`` hands
large freed blocks back to the kernel (every block above its mmap threshold, at most 32 MiB, and
the top of the heap beyond its trim threshold), so the next step touches fresh pages and pays one
page fault per 4 KiB. On a virtual machine that reports freed pages to its host each such fault
is slower still: on the development machine (a Firecracker VM) zeroing a fresh 113 MB buffer
took 46 ms against 3 ms for a reused one, and a SmolLM2-135M update step spent about a third of
its time in such faults.

:func:`keep_freed_memory` tells ``malloc`` to serve every block from its heap and never to shrink
it, and to give every thread the main arena (agents run in threads), so a block freed in one
step is reused by the next. The process's memory then stays at its peak until it exits (a job
runs in a process of its own). Other C libraries (macOS, musl) are left alone.

Keeping is the default. The process that owns the settings turns it off with
``set_policy(keep=False)`` before the first trainer is built (jobs, ``cooplab train`` and ``cooplab
eval`` do so under ``COOPLAB_KEEP_FREED_MEMORY=0``, read by :mod:`jobs.settings`); the engine reads no
environment variables.
"""

from __future__ import annotations

import ctypes
import platform
import threading

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
# glibc's defaults, restored by release_freed_memory (its dynamic mmap threshold stays off)
DEFAULT_TRIM_THRESHOLD = 128 * 1024
DEFAULT_MMAP_MAX = 65536
DEFAULT_ARENA_MAX = 0  # 0: glibc's own limit (8 per core)

_lock = threading.Lock()
_state = {"kept": False, "allowed": True}


def _libc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (whose ``mallopt`` this module speaks), else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallopt"):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc


def set_policy(*, keep: bool) -> None:
    """Whether :func:`keep_freed_memory` may act in this process (default True); with ``keep=False``
    memory kept so far is handed back (:func:`release_freed_memory`). Process-wide."""
    with _lock:
        _state["allowed"] = bool(keep)
    if not keep and _state["kept"]:
        release_freed_memory()


def keep_freed_memory() -> bool:
    """Serve every block from ``malloc``'s heap and never give freed memory back to the kernel.

    Returns whether the policy is in force (False on another C library or when the process turned
    it off with :func:`set_policy`). Idempotent and process-wide.
    """
    with _lock:
        if _state["kept"]:
            return True
        if not _state["allowed"]:
            return False
        libc = _libc()
        if libc is None:
            return False
        # -1 is SIZE_MAX once glibc reads it as a size: the heap's top is never trimmed. One arena:
        # a thread's own arena grows in heaps of at most 64 MiB and maps larger blocks (an embedding
        # gradient, the logits) from the kernel whatever M_MMAP_MAX says, so agents sampling and
        # updating in threads would fault those in at every step; threads that already hold an
        # arena keep it.
        ok = (libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, -1) == 1
              and libc.mallopt(M_ARENA_MAX, 1) == 1)
        if not ok:
            _restore(libc)
        _state["kept"] = ok
        return ok


def release_freed_memory() -> None:
    """Back to ``malloc``'s defaults, and give what is free now back to the kernel."""
    with _lock:
        libc = _libc()
        if libc is None:
            return
        _restore(libc)
        libc.malloc_trim(0)
        _state["kept"] = False


def _restore(libc: ctypes.CDLL) -> None:
    libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
    libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
    libc.mallopt(M_ARENA_MAX, DEFAULT_ARENA_MAX)


def is_kept() -> bool:
    """Whether :func:`keep_freed_memory` is in force in this process."""
    return _state["kept"]
