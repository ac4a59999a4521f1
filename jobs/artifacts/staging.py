"""A checkpoint's files held for its upload, so pruning can never remove a file the upload reads.

When the trainer reports a checkpoint, the training thread links its files (hard links: no byte is
copied, where the filesystem has none they are copied) into ``.tmp-upload-<n>-<name>`` beside it, before
the trainer may prune the folder (``checkpoint_total_limit``). The upload thread reads only that
folder and removes it once the upload ended (stored, superseded or failed). The trainer's own folder
stays the trainer's: it prunes it whenever it likes, and the bytes stay on the local disk until the
upload is done with them. A job that dies leaves its ``.tmp-*`` folders to
:func:`jobs.liveness.cleanup_partial_writes`.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from engine.schema.folders import write_error

log = logging.getLogger(__name__)

PREFIX = ".tmp-upload-"


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    """A hard link (no second copy of the bytes), or a copy where the filesystem has none."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def staged_path(folder: str | Path, number: int = 0) -> Path:
    """Where the upload's own links to ``folder``'s files go: ``.tmp-upload-<number>-<name>`` beside it
    (``number`` tells apart two uploads of one folder)."""
    folder = Path(folder)
    return folder.parent / f"{PREFIX}{number}-{folder.name}"


def stage(folder: str | Path, number: int = 0) -> Path:
    """Link ``folder``'s files into :func:`staged_path` (replacing an older one) and return it. A
    filesystem fault (a full disk where links must be copies) raises
    :class:`~engine.schema.folders.WriteError` naming the disk; nothing is left behind."""
    target = staged_path(folder, number)
    shutil.rmtree(target, ignore_errors=True)
    try:
        shutil.copytree(folder, target, copy_function=link_or_copy)
    except BaseException as exc:
        shutil.rmtree(target, ignore_errors=True)
        error = write_error(exc, target, "the upload's copy of checkpoint")
        if error is exc:
            raise
        raise error from exc
    return target


def release(staged: str | Path) -> None:
    """Remove the upload's links (the trainer's folder, if it still has one, is untouched)."""
    shutil.rmtree(staged, ignore_errors=True)
