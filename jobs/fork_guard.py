"""Forking job processes only between the worker parent's bookkeeping passes.

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
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

FORK_WAIT_S = 30.0
"""How long a fork waits for a bookkeeping pass in progress to end."""

_guard = threading.RLock()
_held_for_fork = threading.local()
_installed_wait_s: float | None = None


@contextmanager
def bookkeeping() -> Iterator[None]:
    """Work done outside the forking thread that a fork must not cut in half."""
    with _guard:
        yield


def _before_fork() -> None:
    wait_s = FORK_WAIT_S if _installed_wait_s is None else _installed_wait_s
    held = _guard.acquire(timeout=wait_s)
    _held_for_fork.held = held
    if not held:
        log.warning("forking while a bookkeeping pass has run for over %g s: the new process may hang on "
                    "a lock that pass holds", wait_s)


def _after_fork_in_parent() -> None:
    if getattr(_held_for_fork, "held", False):
        _held_for_fork.held = False
        _guard.release()


def _after_fork_in_child() -> None:
    global _guard
    _guard = threading.RLock()  # the copy is owned by the parent's forking thread
    _held_for_fork.held = False


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
