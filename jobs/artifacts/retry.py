"""Retries with exponential backoff around one call to the store."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def backoff_delays(tries: int, base_s: float, cap_s: float = 8.0) -> list[float]:
    """The waits between ``tries`` attempts: ``base_s``, twice that, four times, ..., at most ``cap_s``."""
    return [min(cap_s, base_s * (2**i)) for i in range(max(0, tries - 1))]


def with_retries(
    call: Callable[[], T],
    *,
    tries: int,
    base_s: float,
    transient: Callable[[BaseException], bool],
    give_up: Callable[[BaseException, int], Exception],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``; an error ``transient`` accepts is retried after each backoff delay, and the last one
    becomes ``give_up(error, tries)``; any other error is raised at once."""
    delays = backoff_delays(tries, base_s)
    for attempt in range(tries):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - sorted by ``transient`` below
            if not transient(exc):
                raise
            if attempt == tries - 1:
                raise give_up(exc, tries) from exc
            sleep(delays[attempt])
    raise AssertionError("unreachable")
