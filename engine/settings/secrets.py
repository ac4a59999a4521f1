"""Which trainer settings hold credentials, and the same settings with those masked: a config's dict
goes to checkpoints, event logs, W&B and the database, so a key passed to a library config
(``comparator_api_key``) or a credential header never leaves the training process. Torch-free."""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
SECRET_SETTINGS = ("comparator_api_key",)  # the value itself is a credential
HEADER_SETTINGS = ("comparator_api_headers",)  # header name -> value: credential-named headers are
_SENSITIVE_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie")
# the environment variables a run config may name for an API key: an operator exports them on the workers
KEY_VARIABLE = re.compile(r"COOPLAB_API_KEY_[A-Z0-9_]+")


def is_sensitive_header(name: str) -> bool:
    """Whether a header's value may be a credential (its name mentions auth, key, token, secret or cookie)."""
    lowered = str(name).lower()
    return any(word in lowered for word in _SENSITIVE_HEADER_WORDS)


def masked(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with every credential replaced by ``***`` (a copy; absent or empty ones stay)."""
    out = dict(settings)
    for name in SECRET_SETTINGS:
        if out.get(name):
            out[name] = MASK
    for name in HEADER_SETTINGS:
        headers = out.get(name)
        if isinstance(headers, dict):
            out[name] = {k: (MASK if is_sensitive_header(k) else v) for k, v in headers.items()}
    return out


def run_config_header_problem(headers: dict[str, str] | None) -> str | None:
    """Why ``comparator_api_headers`` cannot be stored in a run config (a credential header), or None."""
    named = [k for k in headers or {} if is_sensitive_header(k)]
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
