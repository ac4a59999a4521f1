"""The API keys a run may send, handed to the engine by the process that owns the run.

A run config names its comparator's key by the variable that holds it (``comparator_api_key_env``, a
``COOPLAB_API_KEY_*`` name, :mod:`engine.schema.secrets`), never the key itself. The process that owns
a run hands its keys over with :func:`set_api_keys` before training (the job executor and ``cooplab
train`` pass their environment; only ``COOPLAB_API_KEY_*`` entries are kept), and the comparator
looks its key up with :func:`api_key`.

A script using the engine as a library, as CoMLRL's users do, hands none (``api_keys()`` is None):
CoMLRL's convention then holds, and the variable its config names is read from the script's own
environment. That lookup is the engine's only environment read, and no CoopLab process reaches it.
Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from engine.schema.secrets import KEY_VARIABLE

_keys: dict[str, str] | None = None


def set_api_keys(variables: Mapping[str, str] | None) -> dict[str, str] | None:
    """Hand the engine this process's API keys: the non-empty ``COOPLAB_API_KEY_*`` entries of
    ``variables`` (other entries are dropped, so no other secret of the owner reaches a run). None: no
    keys handed (library use). Returns the previous keys so a caller can restore them."""
    global _keys
    previous = _keys
    _keys = None if variables is None else {k: v for k, v in variables.items() if KEY_VARIABLE.fullmatch(k) and v}
    return previous


def api_keys() -> dict[str, str] | None:
    """The keys this process's owner handed over, by variable (None when none were: library use)."""
    return None if _keys is None else dict(_keys)


def api_key(variable: str) -> str | None:
    """The key ``variable`` holds (None when it holds none): from the keys the owner handed over, or,
    in a script that handed none, from the script's own environment as CoMLRL reads it."""
    if _keys is not None:
        return _keys.get(variable)
    return os.environ.get(variable) or None
