"""Shift the wall clock CoopLab's code reads in this Python process by ``COOPLAB_TEST_CLOCK_SHIFT_S``
seconds: :func:`db.tables.utcnow` (also :func:`db.models.utcnow`), the project's "now", reads that far
ahead (positive) or behind. The system clock, and so SQLite's and PostgreSQL's ``now``, stay as they
are. On ``PYTHONPATH`` it runs at start-up, before any module takes ``utcnow`` from :mod:`db.tables` or
:mod:`db.models`: a worker, and every job it forks,
then behaves as one on a machine whose clock is off by that much. (The ``datetime`` class itself is
left alone: C extensions such as pandas check its exact layout.)"""

from __future__ import annotations

import os

_SHIFT_S = float(os.environ.get("COOPLAB_TEST_CLOCK_SHIFT_S") or 0)

if _SHIFT_S:
    from datetime import timedelta

    import db.models
    import db.tables

    _true_utcnow = db.tables.utcnow
    _SHIFT = timedelta(seconds=_SHIFT_S)

    def _shifted_utcnow():  # type: ignore[no-untyped-def]
        return _true_utcnow() + _SHIFT

    _shifted_utcnow.__doc__ = _true_utcnow.__doc__
    db.tables.utcnow = db.models.utcnow = _shifted_utcnow
