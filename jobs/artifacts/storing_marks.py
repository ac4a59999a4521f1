"""A run's job telling the database that it is still storing its artifacts.

After each file of a checkpoint or an export is stored and checked, the job stamps the run's
``storing_at`` (on the database server's clock, :meth:`db.store.Store.note_storing`), at most once per
``every_s`` seconds. The stop enforcer counts a ``stopping`` run's grace period from its stop request or
from that stamp, whichever is later (:func:`jobs.maintenance.grace_start`): a stop never terminates a job
in the middle of an upload that is making progress, while one that stalls is terminated after the grace
period, as a hung step is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class StoringMarks:
    """Call as an upload's ``progress`` callback: ``note()`` after a stored file, at most every ``every_s`` s.

    A failing ``note`` (the database briefly away) is logged and never fails the upload.
    """

    def __init__(self, note: Callable[[], object], *, every_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.note, self.every_s, self.clock = note, float(every_s), clock
        self._last: float | None = None
        self.marks = 0

    def __call__(self, *_entry: object) -> None:
        now = self.clock()
        if self._last is not None and now - self._last < self.every_s:
            return
        self._last = now
        try:
            self.note()
        except Exception as exc:  # a lost mark only shortens the grace a stop leaves this upload
            log.warning("could not record that the run's artifacts are being stored: %s", exc)
            return
        self.marks += 1
