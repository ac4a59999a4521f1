"""Fixtures shared by every test package, and the ``serial`` marker.

``make test`` runs the suite in two phases (``scripts/test.sh``): ``COOPLAB_TEST_PHASE=parallel``
collects every test but the ``serial`` ones (run in two pytest-xdist processes), then
``COOPLAB_TEST_PHASE=serial`` collects only those (one process, with the machine to itself). Without the
variable every test is collected.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PHASE_ENV = "COOPLAB_TEST_PHASE"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "serial: a test that needs the machine to itself (a fault test whose real worker must replace its "
                   "job process in time; the sandbox attack suite, judged by the sandboxes left on the machine), "
                   "so make test runs these last, in one process")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the serial phase, test files that never name the marker are not even imported."""
    if os.environ.get(PHASE_ENV) != "serial" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return "mark.serial" not in collection_path.read_text(encoding="utf-8", errors="replace") or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    phase = os.environ.get(PHASE_ENV, "")
    if phase not in ("parallel", "serial"):
        return
    wanted = phase == "serial"
    kept = [item for item in items if (item.get_closest_marker("serial") is not None) == wanted]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.fixture
def allow_task_modules() -> Iterator[Callable[..., tuple[str, ...]]]:
    """Put modules on the engine's task module allowlist for one test, as an operator's
    ``COOPLAB_TASK_MODULES`` setting would; the previous allowlist comes back afterwards.

    ``allow_task_modules("my_plugin", "tests.jobs.plugin_tasks")`` returns the allowlist now in force.
    """
    from engine.policy.task_modules import allowed_task_modules, set_allowed_task_modules

    original = allowed_task_modules()

    def allow(*modules: str) -> tuple[str, ...]:
        set_allowed_task_modules(modules)
        return allowed_task_modules()

    yield allow
    set_allowed_task_modules(original)


@pytest.fixture(autouse=True)
def _operator_permissions_restored() -> Iterator[None]:
    """The engine's API hosts, API keys and remote-code permission as they were before each test: a test
    (or the pre-flight or job it calls) applies operator settings process-wide, which must not reach the
    next test."""
    from engine.policy.api_keys import api_keys, set_api_keys
    from engine.policy.outbound import api_hosts, set_api_hosts
    from engine.policy.remote_code import allow_remote_code, remote_code_allowed

    hosts, keys, remote = api_hosts(), api_keys(), remote_code_allowed()
    yield
    set_api_hosts(hosts)
    set_api_keys(keys)
    allow_remote_code(remote)
