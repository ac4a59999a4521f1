"""Device names a worker can serve: ``cpu`` or ``cuda:N``, each its own queue (:mod:`jobs.celery_app`).

Apart from the Celery app so that checking a device name (``cooplab submit`` does it first) loads no
broker client."""

from __future__ import annotations

import re

_DEVICE_RE = re.compile(r"\A(cpu|cuda:\d+)\Z")


def validate_device(device: str) -> str:
    """Return ``device`` if it names a queue a worker can serve (``cpu`` or ``cuda:N``), else raise."""
    if not isinstance(device, str) or not _DEVICE_RE.match(device):
        raise ValueError(f"device must be 'cpu' or 'cuda:N' (e.g. 'cuda:0'), got {device!r}")
    return device
