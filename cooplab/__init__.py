"""The ``cooplab`` command line: wires the engine, storage, workers and dashboard together.

``cooplab.__version__`` is looked up on first use (reading the installed package's metadata costs
about 0.05 CPU-seconds, which every command, ``cooplab submit`` included, would otherwise pay).
"""

from __future__ import annotations

from typing import Any


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cooplab")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value = _version()
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'cooplab' has no attribute {name!r}")
