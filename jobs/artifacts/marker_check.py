"""A completion marker read from the store, checked before anything acts on it.

Whoever can write the bucket or the shared folder can write a marker, so a marker is input, not
truth. :func:`parse_marker` turns its bytes into a :class:`~jobs.artifacts.manifest.Manifest` only
when every field is what the store itself writes:

- ``version`` is the manifest version, ``key`` is the key the marker was read for (a marker copied
  from another folder is refused), ``part_size`` a positive integer, ``created_at`` and ``host``
  short strings;
- ``files`` is a list of at most :data:`MAX_FILES` entries, each with exactly ``path``, ``size``,
  ``md5`` and ``etag``: the path relative and ``/``-separated (no absolute part, no ``..``, ``.``
  or empty part, no backslash, NUL or other control character, at most :data:`MAX_PATH` characters),
  unique, and no path a folder of another; the size an integer from 0 to :data:`MAX_FILE_BYTES`; the
  MD5 32 hex digits; the ETag an MD5 with an optional ``-<parts>``;
- with a signing key (``COOPLAB_ARTIFACTS_SIGNING_KEY``) its HMAC signature is right
  (:mod:`jobs.artifacts.signing`).

Anything else raises :class:`~jobs.artifacts.errors.TamperedMarker` naming the marker and the first
problem found, before any file is written, deleted or downloaded. Torch-free and pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jobs.artifacts.errors import TamperedMarker
from jobs.artifacts.manifest import MANIFEST_VERSION, FileEntry, Manifest
from jobs.artifacts.signing import SIGNATURE_FIELD, signature_problem

MAX_MARKER_BYTES = 32 << 20
"""A marker larger than this is refused before it is read (a folder of :data:`MAX_FILES` files
writes about 20 MB)."""
MAX_FILES = 100_000
MAX_PATH = 1024
MAX_FILE_BYTES = 1 << 40
"""1 TiB: larger than any checkpoint file; a larger size can only be a forged one."""
_FIELDS = {"version", "key", "files", "part_size", "created_at", "host"}
_ENTRY_FIELDS = {"path", "size", "md5", "etag"}
_MD5 = re.compile(r"^[0-9a-f]{32}$")
_ETAG = re.compile(r"^[0-9a-f]{32}(-[1-9][0-9]{0,4})?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def path_problem(path: object) -> str | None:
    """Why ``path`` may not name a file inside a stored folder, or None when it may."""
    if not isinstance(path, str):
        return f"path {path!r} is not a string"
    if not path:
        return "a path is empty"
    if len(path) > MAX_PATH:
        return f"path {path[:40]!r}... is longer than {MAX_PATH} characters"
    if _CONTROL.search(path):
        return f"path {path!r} holds a control character"
    if "\\" in path:
        return f"path {path!r} holds a backslash"
    if path.startswith("/"):
        return f"path {path!r} is absolute"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return f"path {path!r} has an empty, '.' or '..' part"
    return None


def _entry(index: int, raw: object) -> FileEntry:
    if not isinstance(raw, dict) or set(raw) != _ENTRY_FIELDS:
        fields = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise ValueError(f"file {index} has fields {fields}, not {sorted(_ENTRY_FIELDS)}")
    problem = path_problem(raw["path"])
    if problem:
        raise ValueError(f"file {index}: {problem}")
    size = raw["size"]
    if type(size) is not int or not 0 <= size <= MAX_FILE_BYTES:
        raise ValueError(f"file {index} ({raw['path']}): size {size!r} is not a whole number of bytes "
                         f"from 0 to {MAX_FILE_BYTES}")
    md5, etag = raw["md5"], raw["etag"]
    if not isinstance(md5, str) or not _MD5.match(md5):
        raise ValueError(f"file {index} ({raw['path']}): md5 {md5!r} is not 32 lowercase hex digits")
    if not isinstance(etag, str) or not _ETAG.match(etag):
        raise ValueError(f"file {index} ({raw['path']}): etag {etag!r} is not an MD5 with an optional -parts")
    return FileEntry(raw["path"], size, md5, etag)


def _no_overlaps(files: tuple[FileEntry, ...]) -> None:
    paths = [entry.path for entry in files]
    if len(set(paths)) != len(paths):
        twice = next(p for p in paths if paths.count(p) > 1)
        raise ValueError(f"path {twice!r} is listed twice")
    folders = {"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)}
    clash = sorted(folders & set(paths))
    if clash:
        raise ValueError(f"path {clash[0]!r} is both a file and a folder of another file")


def _body(data: bytes, key: str) -> dict[str, Any]:
    if len(data) > MAX_MARKER_BYTES:
        raise ValueError(f"it is {len(data)} bytes, more than the {MAX_MARKER_BYTES} a marker may be")
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"it is not JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise ValueError("it is not a JSON object")
    extra = set(body) - _FIELDS - {SIGNATURE_FIELD}
    missing = _FIELDS - set(body)
    if extra or missing:
        raise ValueError(f"unexpected fields {sorted(extra)}" if extra else f"missing fields {sorted(missing)}")
    if body["version"] != MANIFEST_VERSION or type(body["version"]) is not int:
        raise ValueError(f"unknown manifest version {body['version']!r}")
    if body["key"] != key:
        raise ValueError(f"it names the folder {str(body['key'])[:200]!r}, not {key!r} (a marker copied from "
                         "another folder)")
    if type(body["part_size"]) is not int or body["part_size"] <= 0:
        raise ValueError(f"part_size {body['part_size']!r} is not a positive whole number")
    for name in ("created_at", "host"):
        if not isinstance(body[name], str) or len(body[name]) > 256 or _CONTROL.search(body[name]):
            raise ValueError(f"{name} is not a short line of text")
    if not isinstance(body["files"], list) or len(body["files"]) > MAX_FILES:
        raise ValueError(f"files is not a list of at most {MAX_FILES} entries")
    return body


def parse_marker(data: bytes, key: str, *, signing_key: bytes | None = None, where: str = "",
                 marker_key: str = "") -> Manifest:
    """The manifest in marker ``data`` read for folder ``key``; :class:`TamperedMarker` when anything
    in it is not what the store writes (see the module doc)."""
    try:
        body = _body(data, key)
        files = tuple(_entry(i, raw) for i, raw in enumerate(body["files"]))
        _no_overlaps(files)
        problem = signature_problem(body, signing_key)
        if problem:
            raise ValueError(problem)
    except ValueError as exc:
        raise TamperedMarker(where, marker_key or key, str(exc)) from None
    return Manifest(key, files, body["part_size"], body["created_at"], body["host"])
