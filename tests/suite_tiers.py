"""The suite's unit tier: ``make test-fast`` (``scripts/test.sh --fast``), the inner loop.

The unit tier is every test but those that start servers, workers, browsers or other processes, or train
models for seconds each: tests marked ``slow``, ``integration``, ``browser`` or ``serial``, and the folders
and files in :data:`NOT_UNIT` (each with the reason it is left out). ``make test`` runs them all.

``COOPLAB_TEST_PHASE=fast`` selects the tier (``tests/conftest.py``): the paths in :data:`NOT_UNIT` are not
even imported. A file named on the command line is left out too when it is listed here; run
``pytest tests/engine/trainer/test_x.py`` to run one of them alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

TESTS = Path(__file__).resolve().parent

NOT_UNIT_MARKERS = ("slow", "integration", "browser", "serial")
"""Markers of tests that wait on processes, servers, browsers or the whole machine."""

NOT_UNIT: dict[str, str] = {
    # Relative to tests/; a folder ends with "/".
    "e2e/": "a real dashboard server driven by headless Chromium",
    "bench/": "benchmarks: timed training, storage and dashboard runs",
    "artifacts/": "a real S3 server (SeaweedFS) and job processes",
    "export/": "a real MLflow server",
    "engine/trainer/": "training runs of tiny models",
    "engine/actor_critic/": "training runs of tiny models",
    "engine/preference/": "training runs of tiny models",
    "engine/systems/": "training runs of tiny models",
    "engine/lora/": "training runs of tiny models",
    "engine/distributed/": "FSDP steps of tiny models on gloo ranks in spawned processes",
    "engine/sandbox/": "programs run in bubblewrap sandboxes",
    "engine/tasks/test_humaneval.py": "programs run in bubblewrap sandboxes, some until their timeout",
    "engine/tasks/test_comlrl_code_sandbox.py": "programs run in bubblewrap sandboxes, some until their timeout",
    "engine/test_host_memory.py": "each case counts page faults in a fresh interpreter (a minute in all)",
    "engine/test_gpu_check.py": "the GPU check script, run as a process",
    "engine/models/test_models_remote_code.py": "a model's own code loaded in fresh interpreters",
    "db/test_db_clock.py": "writers in processes on a shifted clock, killed and timed out",
    "jobs/test_jobs_faults.py": "faults made with real processes (kill -9, full disks, parallel clients)",
    "jobs/test_jobs_worker_preload.py": "a worker's preload, measured in fresh interpreters",
    "jobs/test_jobs_fork_guard.py": "forks in fresh interpreters, some waiting for a hang",
    "app/test_app_store_downloads.py": "a real S3 server (SeaweedFS)",
    "test_security_unprivileged.py": "the security tests again, in a pytest of their own as another user",
}


def not_unit_reason(path: Path) -> str | None:
    """Why the test file or folder ``path`` is left out of the unit tier, or None when it is in it."""
    try:
        relative = path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return None
    for listed, reason in NOT_UNIT.items():
        if relative == listed.rstrip("/") or (listed.endswith("/") and relative.startswith(listed)):
            return reason
    return None


def in_unit_tier(path: Path, markers: Iterable[str]) -> bool:
    """Whether a test in the file ``path`` carrying ``markers`` (their names) is in the unit tier."""
    return not_unit_reason(path) is None and not set(NOT_UNIT_MARKERS) & set(markers)
