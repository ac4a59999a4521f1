"""Which carried wheels to install on the GPU machine: ``python -m bench.gpu.wheels .whl`` prints them.

``scripts/fetch_gpu_bench_wheels.sh`` downloads CoMLRL 1.4.3 and what the benchmark imports that the
GPU machine's image lacks into ``.whl/``; ``scripts/gpu_bench.sh`` installs a carried wheel there
when the machine has no such distribution or an older version of it, so the image's own newer
packages are never replaced. Standard library and ``packaging`` only (no torch).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from packaging.version import InvalidVersion, Version


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them (``pydantic_core`` = ``pydantic-core``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name_version(filename: str) -> tuple[str, str]:
    """(distribution, version) from a wheel's file name, e.g. ``pydantic_core-2.50.5-cp312-...whl``."""
    parts = Path(filename).name.split("-")
    if len(parts) < 5 or not filename.endswith(".whl"):
        raise ValueError(f"{filename!r} is not a wheel file name (name-version-python-abi-platform.whl)")
    return canonical(parts[0]), parts[1]


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (None: not installed)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def select_wheels(filenames: list[str], installed: Callable[[str], str | None] = installed_version) -> list[tuple[str, str]]:
    """(wheel, why) for each wheel to install: its distribution is missing, or installed in an older
    version. Two wheels of one distribution are an error (pip would refuse the whole install)."""
    seen: dict[str, str] = {}
    chosen = []
    for filename in sorted(filenames):
        name, version = wheel_name_version(filename)
        if name in seen:
            raise ValueError(f"two wheels of {name}: {seen[name]} and {Path(filename).name}; keep one")
        seen[name] = Path(filename).name
        have = installed(name)
        if have is None:
            chosen.append((filename, f"{name} {version}: not installed"))
            continue
        try:
            older = Version(have) < Version(version)
        except InvalidVersion:
            older = False
        if older:
            chosen.append((filename, f"{name} {version}: installed {have} is older"))
    return chosen


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else ".whl")
    wheels = [str(p) for p in sorted(folder.glob("*.whl"))]
    for filename, why in select_wheels(wheels):
        print(f"installing {why}", file=sys.stderr)
        print(filename)
    return 0


if __name__ == "__main__":
    sys.exit(main())
