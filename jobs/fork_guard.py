"""Forking job processes only between the worker parent's bookkeeping passes and log writes.

A worker parent has threads besides the one that forks job processes: the maintenance pass
(:class:`jobs.maintenance.Repeater`) and Celery's timer, which watches the job processes. A fork copies
the locks those threads hold at that instant into the child, where no thread will ever release them.
The one that bites is Python's per-module import lock: a pass that imports a module for the first time
(settling a killed job, re-sending the runs a restarted broker forgot) while the pool forks a
replacement job process leaves that module locked in the child, and the child hangs the first time it
imports the same module: its run never ends. A client library's connection-pool lock does the same.

:func:`bookkeeping` marks the thread's work; :func:`install` registers an ``os.fork`` hook that waits
(up to ``wait_s``) until no thread is inside it, and holds the others off until the fork is done. A pass
that outlasts the wait (a database that does not answer) does not hold the pool up: the fork goes on
and says so in the worker log.

The same hook holds every logging handler's lock across the fork. A handler writes to its stream
under that lock, and the stream (a ``BufferedWriter``) has a lock of its own that ``logging``'s fork
hooks do not reset (CPython issue 91776): a job process forked while the worker's consumer thread was
writing a log line ("Task ... received", "Canceling queue cpu") inherits the stream's lock held and
hangs the first time it logs or flushes, and a worker in warm shutdown then waits for that job process
forever. Holding the handler locks means no thread is inside a handler's write at the fork.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

FORK_WAIT_S = 30.0
"""How long a fork waits for a bookkeeping pass in progress to end."""

_guard = threading.RLock()
_held_for_fork = threading.local()
_installed_wait_s: float | None = None
_HANDLER_WAIT_S = 5.0
"""How long a fork waits for a log write in progress (a full pipe, a slow disk) before it goes on."""


@contextmanager
def bookkeeping() -> Iterator[None]:
    """Work done outside the forking thread that a fork must not cut in half."""
    with _guard:
        yield


def log_handlers() -> list[logging.Handler]:
    """Every handler attached to a logger of this process (the root logger's first)."""
    loggers = [logging.getLogger(), *(each for each in list(logging.Logger.manager.loggerDict.values())
                                      if isinstance(each, logging.Logger))]
    found: dict[int, logging.Handler] = {}
    for logger in loggers:
        for handler in list(logger.handlers):
            found.setdefault(id(handler), handler)
    return list(found.values())


def _hold_handler_locks(deadline: float) -> tuple[list[Any], int]:
    """Acquire each handler's lock (a write in progress ends first); returns the locks held and how
    many could not be had before ``deadline``."""
    held, missed = [], 0
    for handler in log_handlers():
        lock = handler.lock
        if lock is None:
            continue
        if lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            held.append(lock)
        else:
            missed += 1
    return held, missed


def _before_fork() -> None:
    wait_s = FORK_WAIT_S if _installed_wait_s is None else _installed_wait_s
    held = _guard.acquire(timeout=wait_s)
    _held_for_fork.held = held
    if not held:
        log.warning("forking while a bookkeeping pass has run for over %g s: the new process may hang on "
                    "a lock that pass holds", wait_s)
    # after the pass guard: a pass logs while it holds the guard
    locks, missed = _hold_handler_locks(time.monotonic() + min(wait_s, _HANDLER_WAIT_S))
    _held_for_fork.handler_locks, _held_for_fork.missed = locks, missed


def _after_fork_in_parent() -> None:
    for lock in getattr(_held_for_fork, "handler_locks", ()):
        lock.release()
    _held_for_fork.handler_locks = []
    missed, _held_for_fork.missed = getattr(_held_for_fork, "missed", 0), 0
    if getattr(_held_for_fork, "held", False):
        _held_for_fork.held = False
        _guard.release()
    if missed:  # said once the locks are free again
        log.warning("forked while %d log handler(s) stayed busy for over %g s: the new process may hang "
                    "on its first log line", missed, _HANDLER_WAIT_S)


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.RLock()  # the copy is owned by the parent's forking thread
    _held_for_fork.held = False
    _held_for_fork.handler_locks = []  # logging resets its handlers' locks in the child itself
    _held_for_fork.missed = 0


def install(wait_s: float = FORK_WAIT_S) -> bool:
    """Register the fork hooks for this process (once; later calls only change ``wait_s``).
    Returns True the first time."""
    global _installed_wait_s
    first = _installed_wait_s is None
    _installed_wait_s = wait_s
    if first:
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)
    return first
