"""Messages of an export as they may be shown: without the tracking URI's password.

MLflow's errors embed the URL they called (``API request to http://user:pass@host/api/... failed``),
and a requests error its URL, so a message is masked as a whole: every ``scheme://`` URL in it through
:func:`db.urls.redact_url`, then any remaining copy of the tracking URI's password (as written in the
URI, and decoded). The result is one printable line.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from db.urls import MASK, redact_url

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>()]+")


def _passwords(tracking_uri: str) -> list[str]:
    try:
        password = urlsplit(tracking_uri).password
    except ValueError:
        password = None
    if not password:
        return []
    return sorted({password, unquote(password)}, key=len, reverse=True)


def redact_message(text: str, tracking_uri: str) -> str:
    """``text`` with every URL's password and every copy of ``tracking_uri``'s password as ``***``,
    on one line."""
    shown = _URL.sub(lambda found: redact_url(found.group(0)), str(text))
    for password in _passwords(tracking_uri):
        shown = shown.replace(password, MASK)
    return " ".join("".join(c if c.isprintable() else " " for c in shown).split())
