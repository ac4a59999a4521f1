"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def allow_task_modules() -> Iterator[Callable[..., tuple[str, ...]]]:
    """Put modules on the engine's task module allowlist for one test, as an operator's
    ``COOPLAB_TASK_MODULES`` setting would; the previous allowlist comes back afterwards.

    ``allow_task_modules("my_plugin", "tests.jobs.plugin_tasks")`` returns the allowlist now in force.
    """
    from engine.tasks.allowlist import allowed_task_modules, set_allowed_task_modules

    original = allowed_task_modules()

    def allow(*modules: str) -> tuple[str, ...]:
        set_allowed_task_modules(modules)
        return allowed_task_modules()

    yield allow
    set_allowed_task_modules(original)


@pytest.fixture(autouse=True)
def _operator_permissions_restored() -> Iterator[None]:
    """The engine's API hosts and remote-code permission as they were before each test: a test (or the
    pre-flight it calls) applies operator settings process-wide, which must not reach the next test."""
    from engine.policy.outbound import api_hosts, set_api_hosts
    from engine.policy.remote_code import allow_remote_code, remote_code_allowed

    hosts, remote = api_hosts(), remote_code_allowed()
    yield
    set_api_hosts(hosts)
    allow_remote_code(remote)
