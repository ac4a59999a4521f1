"""Which database owns a data directory.

Run folders (``runs/run-<id>``), logs and job files are keyed by run id, and run ids are only unique
within one database. Two databases pointed at one data directory would write into each other's run
folders and prune each other's checkpoints. So the data directory records the id of the database that
first used it (``<data dir>/database.json``: :meth:`db.store.Store.database_id`, the URL without its
password) and every worker, ``cooplab up`` and every job refuses to use it with another database.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

from db.store import Store
from db.urls import redact_url  # here too for the callers that import it from jobs.datadir
from jobs.settings import Settings

OWNER_FILE = "database.json"


class DataDirOwnedError(RuntimeError):
    """The data directory belongs to another database; the message says what to change."""


def owner_path(settings: Settings) -> Path:
    return settings.data_dir / OWNER_FILE


def read_owner(settings: Settings) -> dict | None:
    """What the data directory records about its database, or None when nothing is recorded yet."""
    try:
        value = json.loads(owner_path(settings).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DataDirOwnedError(f"cannot read {owner_path(settings)} ({exc}); it records which database owns "
                                "the data directory: fix or remove it") from exc
    return value if isinstance(value, dict) else None


def claim_data_dir(settings: Settings, store: Store) -> str:
    """Record ``store``'s database as the owner of the data directory, or check that it already is.
    Returns the database id; raises :class:`DataDirOwnedError` when another database owns it."""
    database_id = store.database_id()
    owner = read_owner(settings)
    if owner is None:
        owner = _record(settings, {"database_id": database_id, "database": redact_url(store.url),
                                   "claimed_at": datetime.now(UTC).isoformat(timespec="seconds")})
    if owner.get("database_id") != database_id:
        raise DataDirOwnedError(
            f"data directory {settings.data_dir} belongs to another database (database id "
            f"{owner.get('database_id', '?')} at {owner.get('database', '?')}), not this one (database id "
            f"{database_id} at {redact_url(store.url)}; the same place with another id means the database there "
            f"was deleted or replaced): two databases sharing one data directory overwrite and prune each "
            f"other's run folders. Point COOPLAB_HOME at a data directory of this database's own, or "
            f"COOPLAB_DATABASE_URL back at its database")
    return database_id


def _record(settings: Settings, owner: dict) -> dict:
    """Create the owner file if there is none (atomically: the first of several processes wins) and
    return what it says."""
    path = owner_path(settings)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data directory: owner-only
    tmp = path.with_name(f".{OWNER_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(owner, indent=2) + "\n", encoding="utf-8")
    try:
        os.link(tmp, path)  # fails if another process recorded an owner first
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return read_owner(settings) or owner
