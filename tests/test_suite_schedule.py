"""How make test's parallel phase deals test files (``tests/suite_schedule.py``): groups and files as work
units, heaviest first."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.suite_schedule import FileOrGroupScheduling, heaviest_first, unit_of, weight_of_test
from tests.suite_tiers import TESTS


@dataclass
class Collected:
    """What :func:`heaviest_first` reads of a collected test: its id, file and markers."""

    nodeid: str
    marks: list[pytest.Mark] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return TESTS.parent / self.nodeid.split("::", 1)[0]

    def iter_markers(self, name: str | None = None):
        return (mark for mark in self.marks if name is None or mark.name == name)


def _mark(name: str, *args: object) -> pytest.Mark:
    return pytest.Mark(name, args, {})


@pytest.mark.parametrize(("nodeid", "unit"), [
    ("tests/db/test_db_runs.py::test_a", "tests/db/test_db_runs.py"),
    ("tests/db/test_db_runs.py::TestRuns::test_a[x-1]", "tests/db/test_db_runs.py"),
    ("tests/e2e/test_signin_e2e.py::test_signin", "e2e"),
    ("tests/e2e/test_run_port.py::test_a_busy_port_prints_only_the_error[up]", "e2e"),
    ("tests/app/test_app_e2e_words.py::test_a[tests/e2e/]", "tests/app/test_app_e2e_words.py"),
])
def test_a_unit_is_a_grouped_folder_or_else_a_file(nodeid: str, unit: str):
    assert unit_of(nodeid) == unit
    assert FileOrGroupScheduling._split_scope(None, nodeid) == unit  # type: ignore[arg-type]


def test_markers_and_tiers_weigh_tests():
    unit_file = TESTS / "db" / "test_db_runs.py"
    training_file = TESTS / "engine" / "trainer" / "test_anything.py"  # left out of the unit tier
    assert weight_of_test(unit_file, set()) < weight_of_test(training_file, set()) < weight_of_test(unit_file, {"slow"})
    assert weight_of_test(unit_file, {"slow", "browser"}) == weight_of_test(unit_file, {"browser"})


def test_heavy_units_go_out_first_and_each_unit_keeps_its_order():
    items = [Collected("tests/app/test_app_a.py::test_1"), Collected("tests/app/test_app_a.py::test_2"),
             Collected("tests/e2e/test_b_e2e.py::test_1", [_mark("browser")]),
             Collected("tests/jobs/test_jobs_c.py::test_1", [_mark("slow")]),
             Collected("tests/db/test_db_d.py::test_1"),
             Collected("tests/e2e/test_e_e2e.py::test_1", [_mark("browser")]),
             Collected("tests/jobs/test_jobs_f.py::test_1", [_mark("integration")])]
    ordered = [item.nodeid for item in heaviest_first(items)]  # type: ignore[arg-type]
    assert ordered == ["tests/e2e/test_b_e2e.py::test_1", "tests/e2e/test_e_e2e.py::test_1",  # one unit, together
                       "tests/jobs/test_jobs_c.py::test_1", "tests/jobs/test_jobs_f.py::test_1",  # equal: as collected
                       "tests/app/test_app_a.py::test_1", "tests/app/test_app_a.py::test_2",
                       "tests/db/test_db_d.py::test_1"]


def test_every_browser_test_lies_in_the_browser_folder():
    marked = [f for f in TESTS.rglob("test_*.py") if re.search(r"^pytestmark = \[pytest\.mark\.browser", f.read_text(), re.M)]
    assert marked and all(unit_of(f.relative_to(TESTS.parent).as_posix()) == "e2e" for f in marked), \
        "a browser test outside tests/e2e starts Chromium in a process of its own; move it to tests/e2e"
