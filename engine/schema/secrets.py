"""Which trainer settings hold credentials: a config's dict goes to checkpoints, event logs, W&B and the
database, so a key passed to a library config (``comparator_api_key``) or a credential header never
leaves the training process (``ConfigModel.to_dict`` in :mod:`engine.schema.derive` masks them). A
run config is stored, so it may hold no credential at all: not in a header, the URL (user info, a
``?key=`` parameter) or the extra JSON body; its key comes from a ``COOPLAB_API_KEY_*`` variable.
Torch-free."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

MASK = "***"
SECRET_SETTINGS = ("comparator_api_key",)  # the value itself is a credential
HEADER_SETTINGS = ("comparator_api_headers",)  # header name -> value: credential-named headers are
_SENSITIVE_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie", "password", "passwd", "credential")
# a JSON body field or URL query parameter holds a credential when one of its words is one of these
# (``client_secret``, ``apiKey``, ``auth``), or its last word is key or token (``api_key``, ``access_token``;
# ``max_tokens`` is a count, not a token)
_CREDENTIAL_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "credential", "credentials",
                               "cookie", "auth", "authorization", "apikey", "bearer", "jwt", "sig", "signature"})
_CREDENTIAL_LAST_WORDS = frozenset({"key", "token"})
_CREDENTIAL_VALUE = re.compile(r"\s*(bearer|basic|token)\s+\S", re.IGNORECASE)
# the environment variables a run config may name for an API key: an operator exports them on the workers
KEY_VARIABLE = re.compile(r"COOPLAB_API_KEY_[A-Z0-9_]+")


def is_sensitive_header(name: str) -> bool:
    """Whether a header's value may be a credential (its name mentions auth, key, token, secret, cookie,
    password or credential)."""
    lowered = str(name).lower()
    return any(word in lowered for word in _SENSITIVE_HEADER_WORDS)


def run_config_header_problem(headers: dict[str, str] | None) -> str | None:
    """Why ``comparator_api_headers`` cannot be stored in a run config (a credential header), or None."""
    named = [k for k, v in (headers or {}).items() if is_sensitive_header(k) or _CREDENTIAL_VALUE.match(str(v))]
    if not named:
        return None
    return (f"{named[0]!r} looks like a credential, and a run config is stored in the database: put the key in "
            f"an environment variable of the workers and name it in comparator_api_key_env (its header is "
            f"comparator_api_key_header)")


def key_variable_problem(name: str | None) -> str | None:
    """Why a run config may not name the variable ``name`` for an API key, or None: only
    ``COOPLAB_API_KEY_*`` variables, so a run cannot send any other secret of the workers to a URL."""
    if name is None or KEY_VARIABLE.fullmatch(name):
        return None
    return (f"{name!r} is not a COOPLAB_API_KEY_* variable; export the key on the workers as e.g. "
            f"COOPLAB_API_KEY_{re.sub(r'[^A-Z0-9]+', '_', name.upper()).strip('_') or 'MYAPI'} and name that (a run "
            f"may not send the workers' other variables to an API)")


def is_credential_field(name: str) -> bool:
    """Whether a JSON body field or URL query parameter named ``name`` may hold a credential (see
    ``_CREDENTIAL_WORDS``): ``api_key``, ``apiKey``, ``access_token``, ``key``, ``client_secret``, ``auth``."""
    words = re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower())
    words = [w for w in words if w]
    return bool(words) and (any(w in _CREDENTIAL_WORDS for w in words) or words[-1] in _CREDENTIAL_LAST_WORDS)


def run_config_url_problem(url: str | None) -> str | None:
    """Why ``comparator_api_url`` cannot be stored in a run config (user info or a credential query
    parameter such as ``?key=``), or None."""
    if not url:
        return None
    parts = urllib.parse.urlsplit(str(url).strip())
    if "@" in parts.netloc:
        return ("the URL carries user info (user:password@...), and a run config is stored in the database: remove "
                "it and put the key in a COOPLAB_API_KEY_* variable of the workers, named in comparator_api_key_env")
    named = [k for k, _v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if is_credential_field(k)]
    if named:
        return (f"the URL's query parameter {named[0]!r} looks like a credential, and a run config is stored in the "
                f"database: remove it and put the key in a COOPLAB_API_KEY_* variable of the workers, named in "
                f"comparator_api_key_env (comparator_api_key_header and _prefix say how it is sent)")
    return None


def run_config_body_problem(body: Any) -> str | None:
    """Why ``comparator_api_extra_body`` cannot be stored in a run config (a field, at any depth, whose
    name says it holds a credential), or None."""
    found = _credential_path(body, "")
    if found is None:
        return None
    return (f"{found!r} looks like a credential, and a run config is stored in the database: remove it and put the "
            f"key in a COOPLAB_API_KEY_* variable of the workers, named in comparator_api_key_env (it is sent in "
            f"the comparator_api_key_header header)")


def _credential_path(value: Any, where: str) -> str | None:
    """The dotted path of the first credential-named field in ``value`` (dicts and lists walked), or None."""
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if is_credential_field(str(key)):
                return path
            found = _credential_path(item, path)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _credential_path(item, f"{where}.{i}" if where else str(i))
            if found is not None:
                return found
    return None
