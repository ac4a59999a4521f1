"""Example run configs that ship with the package (``cooplab train`` accepts their paths).

``example_path(name)`` gives the file path of ``<name>.yaml``.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent


def example_names() -> list[str]:
    """Names of the shipped example configs."""
    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.yaml"))


def example_path(name: str) -> Path:
    """Path of an example config by name (``tiny-quickstart``)."""
    path = EXAMPLES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no example config {name!r}; available: {', '.join(example_names())}")
    return path
