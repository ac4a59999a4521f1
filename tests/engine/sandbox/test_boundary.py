"""The boundary fails closed: without working isolation no code runs, unless the UNSAFE mode is on."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from engine.sandbox import (
    SandboxLimits,
    SandboxUnavailable,
    require_isolation,
    run_python,
)
from engine.sandbox import boundary as boundary_module

LIMITS = SandboxLimits(timeout_s=3.0, memory_mb=256)


def _folders() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("cooplab-sandbox-")}


@pytest.fixture()
def no_bubblewrap(monkeypatch):
    """Discovery as on a machine without bubblewrap."""
    monkeypatch.setattr(boundary_module, "_discover", lambda: "bubblewrap (bwrap) is not installed: "
                        + boundary_module.INSTALL_HINT)


def test_code_is_refused_without_isolation_and_nothing_is_created(no_bubblewrap):
    before = _folders()
    with pytest.raises(SandboxUnavailable) as caught:
        run_python("print('ran')", limits=LIMITS)
    message = str(caught.value)
    assert "bubblewrap (bwrap) is not installed" in message and "apt-get install bubblewrap" in message
    assert "COOPLAB_UNSAFE_SANDBOX_WITHOUT_ISOLATION" in message
    assert _folders() == before
    with pytest.raises(SandboxUnavailable):
        require_isolation()


def test_the_unsafe_mode_runs_code_with_limits_and_the_audit_hook_only(no_bubblewrap):
    unsafe = dataclasses.replace(LIMITS, unisolated_allowed=True)  # the operator's UNSAFE permission
    assert require_isolation(True) == "UNSAFE-unisolated"
    result = run_python("print(6 * 7)", limits=unsafe)
    assert result.ok and result.stdout.strip() == "42" and result.isolation == "UNSAFE-unisolated"
    result = run_python("import socket\nsocket.create_connection(('127.0.0.1', 6379), timeout=1)", limits=unsafe)
    assert result.status == "blocked" and "network access" in result.reason
    with pytest.raises(SandboxUnavailable):  # the same process, limits without the permission: refused
        run_python("print(1)", limits=LIMITS)


def test_the_unsafe_permission_travels_with_the_task_it_was_built_for(no_bubblewrap):
    """Two humaneval tasks built in one process under two permissions: each keeps its own, no global."""
    from engine.permissions.operator import OperatorPermissions
    from engine.tasks import TaskError, build_task

    params = {"train_slice": "0:1", "eval_slice": "1:2", "workers": 1}
    with pytest.raises(TaskError, match="COOPLAB_UNSAFE_SANDBOX_WITHOUT_ISOLATION"):
        build_task("humaneval", params, 1)  # library default: refused before any training starts
    task = build_task("humaneval", params, 1, permissions=OperatorPermissions(unisolated_sandbox=True))
    with pytest.raises(TaskError, match="COOPLAB_UNSAFE_SANDBOX_WITHOUT_ISOLATION"):
        build_task("humaneval", params, 1, permissions=OperatorPermissions())  # still refused after it
    from engine.tasks.humaneval.problems import load_problems

    pool = task.extras["pool"]
    try:
        assert pool.limits.unisolated_allowed is True
        item = task.train_dataset[0]
        problem = next(p for p in load_problems() if p["task_id"] == item["task_id"])
        assert task.check(item, [problem["prompt"] + problem["canonical_solution"]]) is True  # ran, unisolated
    finally:
        pool.close()


def test_a_bubblewrap_that_cannot_create_namespaces_is_detected(monkeypatch):
    tmp_path = Path(tempfile.mkdtemp(prefix="cooplab-fake-bwrap-"))  # the sandbox uid must reach it
    monkeypatch.setattr(boundary_module, "_probe", _probe_then_clean(boundary_module._probe, tmp_path))
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.chmod(tmp_path, 0o755)
    monkeypatch.setattr(boundary_module.shutil, "which", lambda name: str(fake) if name == "bwrap" else None)
    found = boundary_module._discover.__wrapped__()
    assert isinstance(found, str)
    assert "cannot create the sandbox's namespaces" in found and "No permissions to create new namespace" in found


def _probe_then_clean(probe, folder: Path):
    def run(boundary):
        try:
            return probe(boundary)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return run


def test_the_root_holds_only_the_interpreter_its_libraries_and_the_run():
    code = (
        "import os, sys, importlib.util\n"
        "print(sorted(os.listdir('/')))\n"
        "print(sorted(os.listdir('/box')))\n"
        "print(importlib.util.find_spec('engine'), importlib.util.find_spec('torch'), importlib.util.find_spec('pip'))\n"
        "print(os.listdir('/proc').count('1'), len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
        "print(os.uname().nodename)\n"
    )
    result = run_python(code, limits=LIMITS)
    assert result.ok, result
    top, box, specs, procs, host = result.stdout.splitlines()
    assert set(eval(top)) <= {"box", "tmp", "dev", "proc", "usr", "lib", "lib64", "root", "opt", "home"}
    assert eval(box) == ["bootstrap.py", "judge.py", "main.py", "plain.py", "serve.py"]
    assert specs == "None None None"  # no project, no site-packages
    assert procs == "1 2" and host == "sandbox"
