"""Attempts of a run: which checkpoint a resumed attempt continues from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from db.records import Checkpoint, Run

if TYPE_CHECKING:
    from db.store import Store


def newest_checkpoint(store: Store, run: Run, *, include_self: bool = False) -> Checkpoint | None:
    """The newest checkpoint along the run's ``resumed_from`` chain (starting with ``run`` itself when
    ``include_self``): an attempt that saved none passes on the one it started from."""
    seen: set[int] = set()
    source = run.id if include_self else run.resumed_from
    while source is not None and source not in seen:
        seen.add(source)
        checkpoint = store.latest_checkpoint(source)
        if checkpoint is not None:
            return checkpoint
        source = store.get_run(source).resumed_from
    return None


def resume_checkpoint(store: Store, run: Run, *, include_self: bool = False) -> str | None:
    """The folder of :func:`newest_checkpoint` (None when the chain has none)."""
    checkpoint = newest_checkpoint(store, run, include_self=include_self)
    return checkpoint.path if checkpoint is not None else None
