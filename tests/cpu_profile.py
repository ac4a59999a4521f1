"""Per-test CPU time of the suite: ``COOPLAB_TEST_CPU_PROFILE=FILE`` makes every pytest process append one
JSON line per test to ``FILE``: its id, its file, wall seconds, CPU seconds (user + system of the
pytest process and of the child processes it waited for: servers, workers, browsers and job processes a
fixture stopped), when it started (epoch seconds) and which pytest process ran it (the xdist name, or
``main``). A file's module fixtures are set up in its first test and torn down in its last, so a
file's sum is the file's cost. ``python -m tests.cpu_profile FILE`` prints the files by CPU, heaviest
first (docs/testing.md)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

PROFILE_ENV = "COOPLAB_TEST_CPU_PROFILE"
OWNER_ENV = "COOPLAB_TEST_CPU_PROFILE_OWNER"
"""The pid of the pytest the profile was asked of; its xdist processes record too, a pytest that a test
starts (tests/test_suite_threads.py does) does not."""


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(PROFILE_ENV) and not os.environ.get(OWNER_ENV):
        os.environ[OWNER_ENV] = str(os.getpid())


def records_here() -> bool:
    """Whether this process is the profiled pytest or one of its own xdist processes."""
    owner = os.environ.get(OWNER_ENV)
    if not os.environ.get(PROFILE_ENV) or not owner:
        return False
    own_worker = bool(os.environ.get("PYTEST_XDIST_WORKER")) and str(os.getppid()) == owner
    return str(os.getpid()) == owner or own_worker


def cpu_seconds() -> float:
    """User + system seconds of this process and of every child it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not records_here():
        yield
        return
    target = os.environ[PROFILE_ENV]
    cpu, wall, started = cpu_seconds(), time.monotonic(), time.time()
    yield
    line = {"test": item.nodeid, "file": item.nodeid.split("::")[0],
            "cpu": round(cpu_seconds() - cpu, 3), "wall": round(time.monotonic() - wall, 3),
            "start": round(started, 3), "process": os.environ.get("PYTEST_XDIST_WORKER", "main")}
    with open(target, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def by_file(lines: list[dict[str, object]]) -> list[tuple[str, float, float, int]]:
    """(file, CPU seconds, wall seconds, tests) per file, heaviest CPU first."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for line in lines:
        row = totals[str(line["file"])]
        row[0] += float(line["cpu"])  # type: ignore[arg-type]
        row[1] += float(line["wall"])  # type: ignore[arg-type]
        row[2] += 1
    rows = [(name, cpu, wall, int(count)) for name, (cpu, wall, count) in totals.items()]
    return sorted(rows, key=lambda row: -row[1])


def main(argv: list[str]) -> None:
    lines = [json.loads(text) for text in Path(argv[0]).read_text(encoding="utf-8").splitlines() if text]
    rows = by_file(lines)
    total = sum(row[1] for row in rows)
    print(f"{len(lines)} tests, {total:.0f} CPU-s in {len(rows)} files")
    for name, cpu, wall, count in rows[: int(argv[1]) if len(argv) > 1 else 40]:
        print(f"{cpu:8.1f} CPU-s {wall:8.1f} s {count:5d}  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
