"""Errors the store raises; each message names what went wrong and what to do instead."""

from __future__ import annotations

from db.states import InvalidTransition

__all__ = ["StoreError", "NotFoundError", "DuplicateNameError", "RunActiveError", "InvalidTransition"]


class StoreError(Exception):
    """Base class of the store's own errors."""


class NotFoundError(StoreError, LookupError):
    """No row with the requested id (or name)."""


class DuplicateNameError(StoreError, ValueError):
    """An experiment with that name already exists."""


class RunActiveError(StoreError, ValueError):
    """The operation would destroy a run that is still queued, starting, running or stopping."""
