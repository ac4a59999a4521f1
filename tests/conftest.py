"""Fixtures shared by every test package, and the ``serial`` marker.

``make test`` runs the suite in two phases (``scripts/test.sh``): ``COOPLAB_TEST_PHASE=parallel``
collects every test but the ``serial`` ones (run in three pytest-xdist processes), then
``COOPLAB_TEST_PHASE=serial`` collects only those (one process, with the machine to itself). Without the
variable every test is collected.

``make test-fast`` (``scripts/test.sh --fast``), the inner loop, runs the unit tier with
``COOPLAB_TEST_PHASE=fast``: no servers, workers, browsers, training runs or process-heavy tests (the
markers and paths in ``tests/suite_tiers.py``, which are not even imported), in pytest-xdist processes.

With two or more pytest-xdist processes, each computes on one torch thread (see
:func:`one_torch_thread_per_process`). With ``--dist loadgroup`` (make test's parallel phase) the files go
out heaviest first and the browser tests as one unit (``tests/suite_schedule.py``, docs/testing.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytest_plugins = ["tests.cpu_profile"]  # COOPLAB_TEST_CPU_PROFILE=FILE: CPU seconds per test

PHASE_ENV = "COOPLAB_TEST_PHASE"
THREADS_ENV = "OMP_NUM_THREADS"


def one_torch_thread_per_process() -> None:
    """In a pytest-xdist process of two or more, torch computes on one thread (``OMP_NUM_THREADS=1``, which
    the workers, servers and job processes a test starts inherit), unless ``OMP_NUM_THREADS`` is set.

    torch takes a thread per core by default, so two test processes on two cores run four compute threads;
    OpenMP threads that wait at the end of each (tiny) operation spin on a core another process needs.
    Measured on a loaded 2-core machine: tests/engine/actor_critic/test_ac_values.py took 301 s (108 s of
    CPU) with two threads and 35 s (14 s of CPU) with one. The serial phase and a plain ``pytest`` keep
    torch's default. A test that needs more threads sets them itself (``torch.set_num_threads``)."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1) < 2 or THREADS_ENV in os.environ:
        return
    os.environ[THREADS_ENV] = "1"
    torch = sys.modules.get("torch")  # imported before this process read the variable
    if torch is not None:
        torch.set_num_threads(1)


def pytest_configure(config: pytest.Config) -> None:
    one_torch_thread_per_process()
    config.addinivalue_line(
        "markers", "serial: a test that needs the machine to itself (a fault test whose real worker must replace its "
                   "job process in time; the sandbox attack suite, judged by the sandboxes left on the machine), "
                   "so make test runs these last, in one process")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the serial phase, test files that never name the marker are not even imported; in the fast
    phase, neither are the folders and files the unit tier leaves out (``tests/suite_tiers.py``)."""
    if os.environ.get(PHASE_ENV) == "fast":
        from tests.suite_tiers import not_unit_reason

        return not_unit_reason(collection_path) is not None or None
    if os.environ.get(PHASE_ENV) != "serial" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return "mark.serial" not in collection_path.read_text(encoding="utf-8", errors="replace") or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = os.environ.get(PHASE_ENV, "")
    kept = items
    if phase == "fast":
        from tests.suite_tiers import in_unit_tier

        kept = [item for item in items if in_unit_tier(item.path, {mark.name for mark in item.iter_markers()})]
    elif phase in ("parallel", "serial"):
        wanted = phase == "serial"
        kept = [item for item in items if (item.get_closest_marker("serial") is not None) == wanted]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    if _dealt_by_groups(config):  # the heaviest files go out first (tests/suite_schedule.py)
        from tests.suite_schedule import heaviest_first

        kept = heaviest_first(kept)
    items[:] = kept


def _dealt_by_groups(config: pytest.Config) -> bool:
    """``--dist loadgroup``: in pytest-xdist's processes ``dist`` reads "no", and ``loadgroup`` is set."""
    return config.getoption("dist", default="no") == "loadgroup" or getattr(config.option, "loadgroup", False)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` (make test's parallel phase): the browser tests' folder as one work unit, every
    other file as one (:class:`tests.suite_schedule.FileOrGroupScheduling`)."""
    if not _dealt_by_groups(config):
        return None
    from tests.suite_schedule import FileOrGroupScheduling

    return FileOrGroupScheduling(config, log)


@pytest.fixture(scope="session")
def migrated_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated to the newest revision by the real migrations, once per pytest process
    (see ``tests/migrated_db.py``); tests take copies (:func:`migrated_sqlite`), never this file."""
    from tests.migrated_db import build_template

    return build_template(tmp_path_factory.mktemp("migrated-db") / "template.db")


@pytest.fixture
def migrated_sqlite(migrated_db_template: Path) -> Callable[[Path], str]:
    """``migrated_sqlite(path)``: a new, empty, migrated SQLite database at ``path`` (a copy of the
    process's template: 0600, a database id of its own); returns its ``sqlite:///`` URL."""
    from tests.migrated_db import copy_database

    return lambda path: copy_database(migrated_db_template, path)


@pytest.fixture(autouse=True)
def _float32_sampling_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process ``rollout_dtype: auto`` samples float32 weights in float32 on every machine, so a
    test's samples do not depend on whether the CPU has bfloat16 instructions; the tests of ``auto``
    itself set the answer they need (tests/engine/trainer/test_rollout_dtype_auto.py). Worker and job
    processes started by a test choose with the machine's own answer."""
    monkeypatch.setattr("engine.trainer.agents.native_bfloat16", lambda device: False)
