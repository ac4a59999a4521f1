"""The security tests of the store, the run configs, the data directory and the dashboard, again as an
unprivileged user.

Root reads and writes past file permissions, so a defence could pass as root for the wrong reason (or
fail only for others). This runs the listed tests in a pytest of their own as uid 65534 (``setpriv``
from root; as the current user otherwise), with the system's Python of the same version and this
checkout's packages on ``PYTHONPATH`` (the venv's interpreter lives under a folder only root may
enter). The code sandbox's attacks run as that user in ``tests/engine/sandbox/test_attacks.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECURITY_TESTS = [
    "tests/artifacts/test_artifacts_tampered.py",
    "tests/jobs/test_jobs_store_tampered.py::test_a_tampered_marker_fails_resume_evaluation_and_the_run_page_"
    "and_touches_nothing[file-share]",
    "tests/engine/test_engine_read_paths.py",
    "tests/jobs/test_jobs_read_paths.py",
    "tests/engine/models/test_models_kwargs_allowlist.py",
    "tests/app/test_app_guard_responses.py",
    "tests/jobs/test_jobs_data_permissions.py",
    "tests/db/test_db_file_modes.py",
]


def _system_python() -> str | None:
    """An interpreter any user may run, of this interpreter's version (the checkout's compiled
    packages then load in it)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}", sys.executable):
        if os.path.isfile(candidate) and os.stat(candidate).st_mode & 0o001:
            return candidate
    return None


def test_the_security_tests_pass_for_an_unprivileged_user():
    python = _system_python()
    if python is None:
        pytest.skip(f"no python{sys.version_info.major}.{sys.version_info.minor} that other users may run "
                    "(install the system's python3)")
    folder = Path(tempfile.mkdtemp(prefix="cooplab-unprivileged-"))
    os.chmod(folder, 0o777)
    argv = [python, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            f"--basetemp={folder / 'tmp'}", *SECURITY_TESTS]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8",
           "PYTHONPATH": f"{ROOT}:{sysconfig.get_paths()['purelib']}",
           **{k: v for k, v in os.environ.items() if k.startswith("COOPLAB_TEST_")}}
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert " passed" in done.stdout and " failed" not in done.stdout and " error" not in done.stdout, done.stdout
