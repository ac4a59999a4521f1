"""The attack suite: every attack on the code reward gets zero credit or is contained, and leaves
no process and no file behind, as root and as an unprivileged user."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from engine.tasks.humaneval.problems import humaneval_path, load_problems, split_tests

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
_spec = importlib.util.spec_from_file_location("cooplab_sandbox_attacks", HERE / "attacks.py")
attacks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(attacks)

# Every attack is judged by what it leaves behind on the whole machine (sandbox processes, sandbox
# folders in the temp folder), so no other test may run sandboxes at the same time.
pytestmark = pytest.mark.serial


MAP_PROBLEM = {"entry_point": "double", "prompt": "def double(x):\n    \"\"\"Twice x.\"\"\"\n", "preamble": "",
               "steps": [["test", "assert all(map(lambda v: candidate(v) == 2 * v, [1, 2, 3]))"]]}


def _problem(index: int) -> dict:
    problem = load_problems()[index]
    plan = split_tests(problem["test"])
    return {"entry_point": problem["entry_point"], "prompt": problem["prompt"], "preamble": plan.preamble,
            "steps": [list(step) for step in plan.steps]}


@pytest.fixture(scope="module")
def listener():
    """A real TCP service of the caller that a sandbox with network access could reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture(scope="module")
def context(listener, tmp_path_factory):
    canary_dir = tmp_path_factory.mktemp("canary")
    os.chmod(canary_dir, 0o777)  # writable by anyone: only the boundary keeps a daemon from it
    with open("/proc/self/environ", "rb") as fh:
        secret = max(fh.read().decode("latin-1").split("\0"), key=len)
    site = Path(humaneval_path()).parents[2]
    return {
        "problems": {"0": _problem(0), "2": _problem(2), "map": MAP_PROBLEM},
        "paths": [str(humaneval_path()), str(site), str(ROOT), str(ROOT / "engine"), str(Path.home()),
                  str(canary_dir), os.path.expanduser("~/.cooplab"), str(ROOT / ".cooplab")],
        "sockets": ["/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432",
                    "/var/run/redis/redis-server.sock", "/run/mysqld/mysqld.sock", "/var/run/docker.sock"],
        "ports": [listener, 6379, 5432],
        "canary": str(canary_dir / "daemon-canary"),
        "secret": secret,
    }


@pytest.mark.parametrize("name", attacks.ALL)
def test_attack_is_contained(name, context):
    seen = attacks.run_attack(name, context)
    assert attacks.judge_attack(name, seen) == "", seen


def test_the_judged_attacks_fail_for_the_reason_they_should(context):
    """Zero credit for the right reason: the judge saw non-plain data, not a crash of its own."""
    seen = attacks.run_attack("always-equal object", context)
    assert seen["passed"] == 0 and "not plain data" in seen["reason"]
    seen = attacks.run_attack("read the dataset and run the canonical solution", context)
    assert seen["passed"] == 0 and "found" not in seen["reason"]
    seen = attacks.run_attack("a set of hash-colliding integers", context)
    # the candidate races its forged answer line (about 1 MB) against its real answer: when the judge
    # reads the forged one it refuses it as colliding data; on a loaded machine it may read the real,
    # wrong answer first (seen once in a full suite). Either way no credit, within the step limit.
    forged_read = "items of one hash" in seen["reason"]
    assert seen["passed"] == 0 and (forged_read or "AssertionError" in seen["reason"]), seen
    assert "candidate crashed" not in seen["reason"] and "judge" not in seen["reason"].lower(), seen
    assert seen["duration_s"] <= attacks.STEP_TIMEOUT_S + attacks.STEP_MARGIN_S, seen


def test_native_code_meets_the_system_call_filter(context):
    """The attack really runs native code, and every raw call it makes fails with EPERM (without the
    filter, ptrace attached to bubblewrap's process, unshare, keyctl and userfaultfd succeeded)."""
    if not any(name.startswith("libffi.so.") for name in attacks._native_files()):
        pytest.skip("libffi is not on this machine: the attack cannot load ctypes")
    seen = attacks.run_attack("raw system calls from native code", context)
    lines = seen["output"].splitlines()
    assert "NO-NATIVE-CODE" not in seen["output"], seen
    assert [line.split()[:2] for line in lines] == [["blocked", name] for name, _ in attacks.SYSCALLS], seen


def test_socket_families_meet_the_system_call_filter(context):
    """Every socket family but AF_UNIX fails with EPERM from the filter, not from the kernel (without the
    filter AF_VSOCK, AF_NETLINK and AF_INET sockets opened inside the sandbox; AF_ALG or AF_TIPC failed
    only because their module was not loaded); an AF_UNIX socket pair still works."""
    seen = attacks.run_attack("open sockets of other families", context)
    named = {family for _, family, _, _ in attacks.SOCKET_TRIES}
    others = sum(1 for family in range(64) if family != socket.AF_UNIX and family not in named)
    assert seen["output"].splitlines() == [
        *(f"refused {name} 1" for name, *_ in attacks.SOCKET_TRIES),
        *(f"refused socketpair {name} 1" for name, *_ in attacks.SOCKETPAIR_TRIES),
        f"other families refused: {{1: {others}}}",
        "unix pair x",
    ], seen


def _unprivileged_copy(tmp: Path) -> Path:
    """engine.sandbox and the attack file in a folder any user can read."""
    package = tmp / "code"
    shutil.copytree(ROOT / "engine" / "sandbox", package / "engine" / "sandbox",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (package / "engine" / "__init__.py").write_text("", encoding="utf-8")
    for source in (ROOT / "engine" / "sandbox").glob("*.py"):  # engine modules the sandbox imports
        for module in re.findall(r"^from engine\.([\w.]+) import", source.read_text(encoding="utf-8"), re.MULTILINE):
            parts = module.split(".")
            if parts[0] != "sandbox" and (ROOT / "engine" / Path(*parts)).with_suffix(".py").is_file():
                target = (package / "engine" / Path(*parts)).with_suffix(".py")
                target.parent.mkdir(parents=True, exist_ok=True)
                for folder in target.parents:  # each package on the way gets an empty __init__
                    if folder == package:
                        break
                    (folder / "__init__.py").touch()
                shutil.copy((ROOT / "engine" / Path(*parts)).with_suffix(".py"), target)
    shutil.copy(HERE / "attacks.py", package / "attacks.py")
    for path in [tmp, *tmp.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return package


def _readable_python() -> str:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}", sys.executable):
        if os.path.isfile(candidate):
            return candidate
    raise AssertionError("no interpreter found")


@pytest.fixture()
def public_tmp():
    """A folder under the system temp folder that any user can read (pytest's own is private)."""
    folder = Path(tempfile.mkdtemp(prefix="cooplab-attacks-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_attacks_are_contained_for_an_unprivileged_user(context, public_tmp):
    """The same suite as uid 65534 (from root with setpriv; otherwise as the current user)."""
    tmp_path = public_tmp
    package = _unprivileged_copy(tmp_path)
    argv = [_readable_python(), "-I", "-B", str(package / "attacks.py"), json.dumps(context)]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    env = {"PATH": "/usr/bin:/bin", "COOPLAB_ATTACK_SECRET": "cooplab-unprivileged-canary-9a7c"}
    done = subprocess.run([*argv[:-3], "-c",
                           f"import sys; sys.path.insert(0, {str(package)!r}); sys.argv = {argv[-2:]!r}; "
                           f"exec(open({str(package / 'attacks.py')!r}).read())"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=str(package))
    assert done.returncode == 0, done.stderr[-3000:]
    observations = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(observations) == set(attacks.ALL)
    failures = {name: attacks.judge_attack(name, seen) for name, seen in observations.items()}
    assert not any(failures.values()), {k: v for k, v in failures.items() if v}
