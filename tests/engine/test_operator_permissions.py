"""The operator's permissions are one frozen value passed to where they are read, never process-wide state:
two values in one process enforce independently, and no engine module keeps a permission in a global."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.permissions.run_permissions import permission_problems
from engine.schema.run_config import ConfigError, parse_run_config

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE = f"{__name__}:second_only"


def second_only(round_index: int, names: list[str]) -> list[str]:
    """A custom system schedule that lives in this test module."""
    return [names[1]]


def config(task: str = "quickstart", **agent: object) -> dict:
    return {"agents": [{"name": "a", **agent}, {"name": "b"}], "task": {"name": task},
            "trainer": {"max_steps": 1, "max_new_tokens": 4}}


def test_the_value_is_frozen_normalised_and_shows_no_key() -> None:
    value = OperatorPermissions(task_modules=" mylab.tasks, otherpkg,mylab.tasks", api_hosts="api.example.com",
                                allow_remote_code=1, api_keys={"COOPLAB_API_KEY_LAB": "sk-secret", "HOME": "/root"})
    assert value.task_modules == ("mylab.tasks", "otherpkg") and str(value.api_hosts) == "api.example.com"
    assert value.allow_remote_code is True and dict(value.api_keys) == {"COOPLAB_API_KEY_LAB": "sk-secret"}
    assert "sk-secret" not in repr(value) and "sk-secret" not in str(value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.allow_remote_code = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        value.api_keys["COOPLAB_API_KEY_LAB"] = "changed"  # type: ignore[index]
    with pytest.raises(ValueError, match="'os:system' is not a module name"):
        OperatorPermissions(task_modules=["os:system"])
    assert OperatorPermissions() == LIBRARY and LIBRARY.task_modules == () and LIBRARY.unisolated_sandbox is False
    assert (LIBRARY.api_hosts, LIBRARY.allow_remote_code, LIBRARY.vllm_python, LIBRARY.api_keys) == (None,) * 4


def test_two_allowlists_in_one_process_parse_independently() -> None:
    """A plugin task path is accepted under the value that allows its module and refused under the other,
    in either order: nothing one parse allows lingers for the next."""
    allowing, refusing = OperatorPermissions(task_modules=[__name__]), OperatorPermissions()
    plugin = config(task=f"{__name__}:factory")
    for _ in range(2):
        assert parse_run_config(plugin, task_modules=allowing.task_modules).task.name == f"{__name__}:factory"
        with pytest.raises(ConfigError, match=f"module '{__name__}' is not on the task module allowlist"):
            parse_run_config(plugin, task_modules=refusing.task_modules)
    with pytest.raises(ConfigError, match="is not on the task module allowlist"):
        parse_run_config(plugin)  # no allowlist given: none


def test_two_custom_schedule_allowlists_in_one_process() -> None:
    data = config()
    data["system"] = {"trainers": [{"name": "t1", "agents": ["a"]}, {"name": "t2", "agents": ["b"]}],
                      "schedule": {"type": "custom", "function": SCHEDULE}}
    assert parse_run_config(data, task_modules=(__name__,)).system is not None
    with pytest.raises(ConfigError, match=f"custom schedule function '{SCHEDULE}' is not allowed"):
        parse_run_config(data)


def test_two_remote_code_permissions_in_one_process_judge_independently() -> None:
    asking = parse_run_config(config(model="org/model", model_kwargs={"trust_remote_code": True}))
    allowed = OperatorPermissions(allow_remote_code=True, api_hosts="")
    refused = OperatorPermissions(allow_remote_code=False, api_hosts="")
    for _ in range(2):
        assert permission_problems(asking, allowed) == []
        [(field, message)] = permission_problems(asking, refused)
        assert field == "agents.0.model_kwargs" and "COOPLAB_ALLOW_REMOTE_CODE=true" in message
    assert permission_problems(asking, LIBRARY)  # nothing applied: the checks still refuse (fail closed)


def _module_globals(path: Path) -> list[str]:
    """Names a module rebinds with a ``global`` statement."""
    return [name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Global) for name in node.names]


def test_no_engine_module_keeps_a_permission_in_a_global() -> None:
    """The six process-wide permissions are gone (task modules, the UNSAFE sandbox switch, API hosts, remote
    code, the vLLM python, API keys): the only ``global`` left among the permission modules is the read
    area, scoped to a ``with`` block of ``run_training`` (:func:`engine.permissions.read_paths.reading_within`)."""
    modules = [*sorted((ROOT / "engine" / "permissions").glob("*.py")), ROOT / "engine" / "sandbox" / "boundary.py",
               ROOT / "engine" / "sampling" / "vllm_python.py"]
    found = {path.relative_to(ROOT).as_posix(): names for path in modules if (names := _module_globals(path))}
    assert found == {"engine/permissions/read_paths.py": ["_area"]}, found
