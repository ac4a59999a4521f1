"""How ``make test``'s parallel phase deals test files to its pytest-xdist processes
(``--dist loadgroup --no-loadscope-reorder``, ``scripts/test.sh``; tests/conftest.py puts
:class:`FileOrGroupScheduling` in loadgroup's place).

- A work unit is a test file, or a whole folder of :data:`GROUPS`: the browser tests (tests/e2e) are
  one unit, so one process runs them all and starts Chromium and the shared ``cooplab up`` once
  (tests/e2e/conftest.py). Folders, not ``xdist_group`` marks: with pytest 9.2, pytest-xdist 3.8 no
  longer manages to add a mark's group to the test ids (it sets ``item._nodeid``, which ``nodeid`` no
  longer reads), so its own loadgroup deals every test alone, starting a file's module fixtures
  (workers, servers) in each process that got one of its tests.
- Units go out heaviest first (:func:`heaviest_first`, applied to the collection in each process).
  ``loadfile`` sends the files with the most tests first, so files of one or two tests that take
  minutes (browser, fault, worker and training tests) came last, and the phase ended with them
  contending for two cores while the other processes had run out of work. A unit's weight is a guess
  from its tests' markers and tier (:data:`WEIGHTS`), not a measurement: it only has to put minutes
  before seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.suite_tiers import not_unit_reason

GROUPS = {"tests/e2e/": "e2e"}
"""Folders (as test ids begin) whose files make one work unit, by the unit's name."""
WEIGHTS = {"browser": 40.0, "slow": 10.0, "integration": 10.0, "serial": 10.0}
"""Guessed seconds per test, by its heaviest marker."""
NOT_UNIT_PATH_WEIGHT = 3.0
"""A test of a file or folder the unit tier leaves out (tests/suite_tiers.py), without such a marker."""
UNIT_WEIGHT = 0.1
"""Any other test."""


def unit_of(nodeid: str) -> str:
    """The work unit of a test id: its folder's group name (:data:`GROUPS`), else its file."""
    path = nodeid.split("::", 1)[0]
    return next((name for folder, name in GROUPS.items() if path.startswith(folder)), path)


def weight_of_test(path: Any, markers: Iterable[str]) -> float:
    """The guessed cost of one test in the file ``path`` carrying ``markers`` (their names)."""
    marked = [WEIGHTS[name] for name in markers if name in WEIGHTS]
    if marked:
        return max(marked)
    return NOT_UNIT_PATH_WEIGHT if not_unit_reason(path) is not None else UNIT_WEIGHT


def heaviest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` with their work units in order of falling weight; within a unit, and between units of
    equal weight, the collection's order stays."""
    units: dict[str, float] = {}
    keys = []
    for item in items:
        unit = unit_of(item.nodeid)
        units[unit] = units.get(unit, 0.0) + weight_of_test(item.path, {mark.name for mark in item.iter_markers()})
        keys.append(unit)
    first_seen = {unit: position for position, unit in enumerate(units)}
    order = sorted(range(len(items)), key=lambda i: (-units[keys[i]], first_seen[keys[i]], i))
    return [items[i] for i in order]


class FileOrGroupScheduling(LoadScopeScheduling):
    """Work units of one file each, or of a whole folder of :data:`GROUPS` (see the module's docstring)."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
