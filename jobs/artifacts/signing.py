"""Signed completion markers: a store shared with others cannot forge a checkpoint.

Every worker holds write credentials for the store, and so may others who share the bucket. The
checks of :mod:`jobs.artifacts.marker_check` keep a forged marker from writing or deleting anything
outside the folder it names, but a forged marker whose paths are valid still makes its objects a
checkpoint that a resume or an evaluation loads. With ``COOPLAB_ARTIFACTS_SIGNING_KEY`` set (the same
secret on every worker and dashboard), each marker carries an HMAC-SHA256 of its content and a marker
without the right one is refused: only a holder of the key can make a folder complete. The manifest
names every file's size and MD5, and each download is checked against them, so the objects are bound
to the signed marker too (MD5 still resists second preimages: matching a file someone else wrote is
out of reach even where making two colliding files of one's own is not).

Without a key, markers are written unsigned and any marker that passes the checks is accepted: the
store's own access control is then what stands between its writers and the workers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

SIGNATURE_FIELD = "signature"
_SCHEME = "hmac-sha256:"


def canonical(body: dict[str, Any]) -> bytes:
    """The bytes a marker's signature covers: its fields but the signature, as sorted compact JSON."""
    fields = {name: value for name, value in body.items() if name != SIGNATURE_FIELD}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(body: dict[str, Any], key: bytes) -> str:
    """The signature of marker ``body`` under ``key``."""
    return _SCHEME + hmac.new(key, canonical(body), hashlib.sha256).hexdigest()


def signature_problem(body: dict[str, Any], key: bytes | None) -> str | None:
    """Why marker ``body`` fails the signature check under ``key`` (None: no key, nothing to check),
    or None when its signature is right."""
    if key is None:
        return None
    given = body.get(SIGNATURE_FIELD)
    if not isinstance(given, str) or not given.startswith(_SCHEME):
        return ("it is not signed, and this machine requires signed markers (COOPLAB_ARTIFACTS_SIGNING_KEY is "
                "set): it was written by a worker without the key, or by someone else")
    if not hmac.compare_digest(given, sign(body, key)):
        return ("its signature is wrong: it was changed after it was written, or signed with another "
                "COOPLAB_ARTIFACTS_SIGNING_KEY")
    return None
