"""Database and broker URLs as they may be shown: in command output, messages and the data
directory's owner file, never with a password.

:func:`redact_url` masks the password of the user part (``postgresql://user:***@host/db``,
``redis://:***@host:6379/0``) and the value of a password-like query parameter
(``?password=***``), for SQLAlchemy URLs and any other ``scheme://`` URL alike.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_USERINFO = re.compile(r"(://[^:/@\s]*:)[^@/\s]+@")
_SECRET_QUERY = re.compile(r"(?i)([?&](?:[a-z_]*password|passwd|pwd|secret|token)=)[^&#]*")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``; a URL without one is returned unchanged."""
    url = str(url)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL urllib can split (e.g. a bad port)
        password = None
    if password is not None:
        userinfo, _, host = parts.netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        url = urlunsplit((parts.scheme, f"{user}:{MASK}@{host}", parts.path, parts.query, parts.fragment))
    else:  # not split as a URL (a bad scheme or port): mask whatever looks like user:password@
        url = _USERINFO.sub(rf"\g<1>{MASK}@", url)
    return _SECRET_QUERY.sub(rf"\g<1>{MASK}", url)
