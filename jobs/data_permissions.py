"""The data directory is its owner's alone: the database, run folders, logs and broker messages in it
hold run configs, transcripts, checkpoints and tokens that no other user of the machine should read.

:func:`private_folders` creates each folder owner-only (0700) and tightens one that already exists
with access for other users, logging once what it changed (a data directory made by an older
version, or by hand, is usually 0755).
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

OWNER_ONLY = 0o700


def private_folders(folders: Iterable[Path]) -> list[tuple[Path, int]]:
    """Create every folder of ``folders`` (in order: a folder before its subfolders) with mode 0700,
    and take group and other access from any that has it. Returns the tightened folders with their
    former modes; one warning names them."""
    tightened: list[tuple[Path, int]] = []
    for folder in folders:
        folder.mkdir(mode=OWNER_ONLY, parents=True, exist_ok=True)
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode & 0o077:
            folder.chmod((mode & ~0o077) | OWNER_ONLY)
            tightened.append((folder, mode))
    if tightened:
        shown = ", ".join(f"{folder} ({mode:04o})" for folder, mode in tightened)
        log.warning("data directory folders were readable by other users: %s; now owner-only (0700)", shown)
    return tightened
