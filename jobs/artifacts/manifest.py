"""What a stored folder holds: each file's size, MD5 and the ETag an S3 server gives it.

The manifest is written last, as the folder's completion marker, so a folder without one was never
completely uploaded and is never offered. An S3 server's ETag of a single-part upload is the MD5 of
the object; of a multipart upload it is the MD5 of the parts' MD5s followed by ``-<parts>``. The part
size is the client's, adjusted as boto3's transfer manager does (at most 10,000 parts, each 5 MiB to
5 GiB), so the expected ETag of every file is known before it is sent.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MANIFEST_VERSION = 1
MIN_PART = 5 << 20
MAX_PART = 5 << 30
MAX_PARTS = 10_000
_READ = 1 << 20


@dataclass(frozen=True)
class FileEntry:
    """One file of a folder: its path inside it (``/``-separated), size, MD5 and expected S3 ETag."""

    path: str
    size: int
    md5: str
    etag: str


@dataclass(frozen=True)
class Manifest:
    """A stored folder: its ``key``, files, the part size its ETags assume, when and where it was made."""

    key: str
    files: tuple[FileEntry, ...]
    part_size: int
    created_at: str
    host: str

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def body(self) -> dict[str, Any]:
        """The marker's fields as JSON values (what :mod:`jobs.artifacts.signing` signs)."""
        return {"version": MANIFEST_VERSION, **asdict(self), "files": [asdict(f) for f in self.files]}

    def to_json(self, signature: str | None = None) -> bytes:
        """The completion marker's bytes; a marker read back is checked by
        :func:`jobs.artifacts.marker_check.parse_marker`."""
        body = self.body()
        if signature is not None:
            body["signature"] = signature
        return json.dumps(body, indent=1, sort_keys=True).encode()


def part_size_for(size: int, part_size: int) -> int:
    """The part size a multipart upload of ``size`` bytes uses when ``part_size`` is asked for."""
    chunk = part_size
    while math.ceil(size / chunk) > MAX_PARTS:
        chunk *= 2
    return min(MAX_PART, max(MIN_PART, chunk))


def multipart_etag(part_md5s: Iterable[bytes]) -> str:
    """The S3 ETag of a multipart object from its parts' binary MD5 digests."""
    digests = list(part_md5s)
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"


def same_etag(expected: str, reported: str | None) -> bool:
    """True when the server's ETag (quoted or not) is the expected one."""
    return reported is not None and reported.strip().strip('"').lower() == expected.lower()


def hash_file(path: Path, part_size: int) -> tuple[int, str, str]:
    """``(size, md5, etag)`` of a file, reading it once; a file of ``part_size`` bytes or more is sent
    in parts, so its ETag is the multipart one."""
    size = os.path.getsize(path)
    whole = hashlib.md5()
    chunk = part_size_for(size, part_size)
    parts: list[bytes] = []
    part = hashlib.md5()
    in_part = 0
    with open(path, "rb") as handle:
        while block := handle.read(min(_READ, chunk - in_part)):
            whole.update(block)
            part.update(block)
            in_part += len(block)
            if in_part == chunk:
                parts.append(part.digest())
                part, in_part = hashlib.md5(), 0
    if in_part:
        parts.append(part.digest())
    md5 = whole.hexdigest()
    return size, md5, (multipart_etag(parts) if size >= part_size else md5)


def folder_files(folder: Path) -> list[str]:
    """The files under ``folder`` as sorted ``/``-separated relative paths (links are refused)."""
    found: list[str] = []
    for current, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            path = Path(current) / name
            if path.is_symlink():
                raise ValueError(f"{path} is a symbolic link; a stored folder holds plain files only")
            found.append(path.relative_to(folder).as_posix())
    return sorted(found)


def folder_manifest(folder: Path, key: str, part_size: int, host: str) -> Manifest:
    """The manifest of ``folder`` to be stored under ``key``."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    entries = []
    for rel in folder_files(folder):
        size, md5, etag = hash_file(folder / rel, part_size)
        entries.append(FileEntry(rel, size, md5, etag))
    created = datetime.now(UTC).isoformat(timespec="milliseconds")
    return Manifest(key, tuple(entries), part_size, created, host)


def step_of(name: str) -> int | None:
    """The step of a ``checkpoint-<step>`` folder name (None for other names)."""
    head, _, tail = name.rpartition("-")
    return int(tail) if head and tail.isdigit() else None


def newest_first(manifests: Iterable[Manifest]) -> list[Manifest]:
    """Stored folders newest first: by the step in their name (``checkpoint-<step>``), then by when
    they were completed; folders without a step come after those with one."""
    return sorted(
        manifests,
        key=lambda m: (step_of(m.name) is not None, step_of(m.name) or 0, m.created_at),
        reverse=True,
    )
