"""Where the artifact store is: ``COOPLAB_ARTIFACTS_URL`` parsed into a :class:`Location`.

- unset or empty: the local data directory itself (files stay where the trainer wrote them);
- ``file:///mnt/shared/cooplab``: a folder on a filesystem every machine mounts;
- ``s3://bucket/prefix``: an S3-compatible server (AWS S3, MinIO, SeaweedFS, Ceph); the endpoint and
  the credentials come from the standard ``AWS_*`` variables.

Keys inside the store are relative, ``/``-separated paths such as ``runs/run-3/checkpoints/checkpoint-40``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

LOCAL, FILE, S3 = "local", "file", "s3"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class Location:
    """``kind`` (local, file, s3), ``url`` to show, and ``root`` (a folder) or ``bucket``/``prefix``."""

    kind: str
    url: str
    root: Path | None = None
    bucket: str | None = None
    prefix: str = ""


def parse_location(url: str | None, data_dir: Path) -> Location:
    """The store named by ``url`` (``COOPLAB_ARTIFACTS_URL``); ``ValueError`` with one line when it is bad."""
    text = (url or "").strip()
    if not text:
        root = Path(data_dir).expanduser().resolve()
        return Location(LOCAL, f"file://{root}", root=root)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(
                f"COOPLAB_ARTIFACTS_URL={text}: a file URL names a local path (file:///mnt/shared/...), "
                f"not a host ({parts.netloc})"
            )
        path = Path(unquote(parts.path))
        if not path.is_absolute() or str(path) == "/":
            raise ValueError(
                f"COOPLAB_ARTIFACTS_URL={text}: give an absolute folder, e.g. file:///mnt/shared/cooplab"
            )
        return Location(FILE, f"file://{path}", root=path)
    if scheme == "s3":
        bucket = parts.netloc
        if not _BUCKET.match(bucket) or ".." in bucket:
            raise ValueError(
                f"COOPLAB_ARTIFACTS_URL={text}: {bucket!r} is not a bucket name (3 to 63 lowercase "
                "letters, digits, dots and hyphens)"
            )
        prefix = normalise_key(parts.path, allow_empty=True)
        return Location(S3, f"s3://{bucket}/{prefix}".rstrip("/"), bucket=bucket, prefix=prefix)
    raise ValueError(
        f"COOPLAB_ARTIFACTS_URL={text}: use s3://bucket/prefix, file:///absolute/folder, or leave it "
        "unset for the local data directory"
    )


def normalise_key(key: str, *, allow_empty: bool = False) -> str:
    """``key`` as a relative ``/``-separated path without empty, ``.`` or ``..`` parts."""
    parts = [p for p in str(key).replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"artifact key {key!r} may not contain '..'")
    if not parts and not allow_empty:
        raise ValueError("an artifact key may not be empty")
    return "/".join(parts)


def cache_path(cache_dir: str | Path, key: str) -> Path:
    """Where the store's folder ``key`` is kept in this machine's ``cache_dir``: always inside it
    (``ValueError`` for a key with ``..``)."""
    return Path(cache_dir).joinpath(*normalise_key(key).split("/"))


def join_key(*parts: str) -> str:
    """Keys joined with ``/`` (empty parts dropped)."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def run_key(run_id: int) -> str:
    """The folder of run ``run_id`` in the store: ``runs/run-<id>``."""
    return f"runs/run-{int(run_id)}"


def checkpoint_key(run_id: int, step: int) -> str:
    """A checkpoint of run ``run_id`` at ``step``: ``runs/run-<id>/checkpoints/checkpoint-<step>``."""
    return f"{run_key(run_id)}/checkpoints/checkpoint-{int(step)}"


def checkpoints_key(run_id: int) -> str:
    """The folder holding run ``run_id``'s checkpoints: ``runs/run-<id>/checkpoints``."""
    return f"{run_key(run_id)}/checkpoints"


def logs_key(run_id: int) -> str:
    """The per-run logs of run ``run_id``: ``runs/run-<id>/logs``."""
    return f"{run_key(run_id)}/logs"


def export_key(run_id: int, name: str) -> str:
    """An exported model or LoRA adapter folder ``name`` of run ``run_id``:
    ``runs/run-<id>/exports/<name>`` (``ValueError`` for an empty name or one with ``..``)."""
    return f"{run_key(run_id)}/exports/{normalise_key(name)}"


def iterations_key(run_id: int) -> str:
    """The preference trainers' iteration files of run ``run_id``: ``runs/run-<id>/iterations``."""
    return f"{run_key(run_id)}/iterations"
