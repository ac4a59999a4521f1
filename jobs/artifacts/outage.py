"""A job's uploads waiting through an artifact store outage, as its writes wait through a database one.

An upload that fails with :class:`~jobs.artifacts.errors.StoreUnavailable` (the store did not answer
after its own tries, ``COOPLAB_ARTIFACTS_TRIES``) is tried again after 0.5, 1, 2, 4, then every 5 s,
while the run trains on, until the store has been unreachable for ``outage_s`` seconds
(``COOPLAB_STORE_OUTAGE_S``, 60); then :class:`StoreOutage` is raised naming the store, how long and
its last error. The outage counts from the first failure and ends at the first call that succeeds.
Its start and end are reported to ``noted(problem)`` (``problem`` None once it answers again), which
the job records on its run (:meth:`db.store.Store.note_store_outage`): the dashboard shows "store
unreachable since ..." on the run's page and the Workers page.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from jobs.artifacts.errors import ArtifactStoreError, StoreUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

WAITS_S = (0.5, 1.0, 2.0, 4.0)
"""Pauses before the first tries again; every later one waits :data:`MAX_WAIT_S`."""
MAX_WAIT_S = 5.0


class StoreOutage(ArtifactStoreError):
    """The artifact store stayed unreachable longer than the job may wait; the message names it."""


class Abandoned(Exception):
    """The caller no longer needs the call it was waiting to try again (its checkpoint was pruned)."""


class Outage:
    """Whether the store answers, as one job sees it. ``noted(problem)`` is told when it stops and starts
    answering (a failing ``noted`` is logged, never raised)."""

    def __init__(self, where: str, outage_s: float, *, noted: Callable[[str | None], object] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.where, self.outage_s, self.noted = where, float(outage_s), noted
        self._clock, self._sleep = clock, sleep
        self.since: float | None = None
        self.longest_s = 0.0

    @property
    def seconds(self) -> float:
        """How long the current outage has lasted (0 while the store answers)."""
        return 0.0 if self.since is None else self._clock() - self.since

    def _note(self, problem: str | None) -> None:
        if self.noted is None:
            return
        try:
            self.noted(problem)
        except Exception as exc:  # the database may be away too; the dashboard only shows less
            log.warning("could not record the artifact store's state on the run: %s", exc)

    def failed(self, exc: StoreUnavailable) -> None:
        if self.since is None:
            self.since = self._clock()
            log.warning("artifact store %s unreachable: %s; uploads wait and try again for up to %g s "
                        "(COOPLAB_STORE_OUTAGE_S) while training goes on", self.where, exc, self.outage_s)
            self._note(str(exc))

    def answered(self) -> None:
        if self.since is not None:
            lasted = self.seconds
            self.longest_s = max(self.longest_s, lasted)
            self.since = None
            log.warning("artifact store %s answers again after %.1f s unreachable", self.where, lasted)
            self._note(None)

    def call(self, what: str, call: Callable[[], T], *, abandon: Callable[[], bool] = lambda: False) -> T:
        """``call()``, tried again while the store is unreachable (see the module doc). Raises
        :class:`StoreOutage` after ``outage_s``, :class:`Abandoned` when ``abandon()`` turns true
        between tries; any other error at once."""
        tries = 0
        while True:
            try:
                result = call()
            except StoreUnavailable as exc:
                self.failed(exc)
                lasted = self.seconds
                if lasted >= self.outage_s:
                    raise StoreOutage(
                        f"the artifact store was unreachable for {lasted:.0f} s (COOPLAB_STORE_OUTAGE_S="
                        f"{self.outage_s:g}) while {what}: {exc}") from exc
                pause = min(WAITS_S[tries] if tries < len(WAITS_S) else MAX_WAIT_S, self.outage_s - lasted)
                tries += 1
                log.info("artifact store %s: %s failed (%.0f s unreachable); trying again in %.1f s",
                         self.where, what, lasted, pause)
                self._sleep(max(0.0, pause))
                if abandon():
                    raise Abandoned(what) from exc
                continue
            self.answered()
            return result
