"""The unit tier (``make test-fast``, ``tests/suite_tiers.py``): what it leaves to ``make test``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.suite_tiers import NOT_UNIT, NOT_UNIT_MARKERS, TESTS, in_unit_tier, not_unit_reason


def test_every_path_left_out_exists_so_the_list_cannot_rot():
    missing = [path for path in NOT_UNIT if not (TESTS / path.rstrip("/")).exists()]
    assert not missing, f"tests/suite_tiers.py names paths that are gone: {missing}; drop them from NOT_UNIT"
    folders = [path for path in NOT_UNIT if (TESTS / path.rstrip("/")).is_dir()]
    assert all(path.endswith("/") for path in folders), folders


def test_the_markers_left_out_are_declared_ones(pytestconfig: pytest.Config):
    declared = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(NOT_UNIT_MARKERS) <= declared


@pytest.mark.parametrize("path", [TESTS / "e2e" / "test_signin_e2e.py", TESTS / "e2e", TESTS / "bench",
                                  TESTS / "engine" / "trainer" / "test_anything.py",
                                  TESTS / "test_security_unprivileged.py"])
def test_servers_browsers_training_and_processes_are_left_out(path: Path):
    assert not_unit_reason(path)
    assert not in_unit_tier(path, set())


UNIT_PATHS = [TESTS / "db" / "test_db_runs.py", TESTS / "engine" / "tasks" / "test_registry.py",
              TESTS / "engine" / "test_engine_config.py", TESTS / "engine", TESTS / "conftest.py",
              TESTS / "engine" / "trainer_like" / "test_x.py"]


@pytest.mark.parametrize("path", UNIT_PATHS)
def test_the_rest_is_in_the_unit_tier(path: Path):
    assert not_unit_reason(path) is None
    assert in_unit_tier(path, set())


@pytest.mark.parametrize("marker", ["slow", "integration", "browser", "serial"])
def test_a_marked_test_is_left_out_wherever_it_lives(marker: str):
    assert not in_unit_tier(TESTS / "db" / "test_db_runs.py", {marker, "parametrize"})
    assert in_unit_tier(TESTS / "db" / "test_db_runs.py", {"parametrize", "timeout"})


def test_a_path_outside_the_tests_folder_is_not_judged():
    assert not_unit_reason(Path("/somewhere/else/e2e/test_x.py")) is None
