"""A worker imports the engine's libraries once, before it forks job processes (jobs.worker.preload_engine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

def _preload(tmp_path: Path, value: str) -> dict:
    code = ("import json, sys\n"
            "from jobs.settings import Settings\n"
            "from jobs.worker import preload_engine\n"
            "import gc\n"
            "seconds = preload_engine(Settings())\n"
            "loaded = {m: m in sys.modules for m in ('torch', 'transformers', 'datasets', 'engine.build.run')}\n"
            "cuda = sys.modules['torch'].cuda.is_initialized() if 'torch' in sys.modules else None\n"
            "frozen, collecting = gc.get_freeze_count(), gc.isenabled()\n"
            "before = set(sys.modules)\n"  # a job's task data: a Dataset, built from what the preload loaded
            "from engine.tasks.datasets import items_to_dataset\n"
            "items_to_dataset([{'prompt': 'a'}])\n"
            "new = sorted({m.split('.')[0] for m in set(sys.modules) - before} & {'datasets', 'pandas', 'pyarrow'})\n"
            "print(json.dumps({'seconds': seconds, 'loaded': loaded, 'cuda': cuda, 'frozen': frozen,\n"
            "                  'collecting': collecting, 'new': new}))\n")
    env = {**os.environ, "COOPLAB_HOME": str(tmp_path), "COOPLAB_WORKER_PRELOAD": value,
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("value", ["true", "false"])
def test_the_preload_imports_the_engine_and_datasets_without_cuda_or_nothing_when_off(tmp_path, value):
    found = _preload(tmp_path, value)
    assert found["collecting"] is True
    if value == "true":
        assert found["seconds"] > 0
        assert found["loaded"] == {"torch": True, "transformers": True, "datasets": True, "engine.build.run": True}
        assert found["cuda"] is False
        assert found["frozen"] > 100_000  # the job processes' collections skip the preloaded objects
        assert found["new"] == []  # a job builds its task's Dataset without importing datasets again
    else:
        assert found["seconds"] is None
        assert found["loaded"] == {"torch": False, "transformers": False, "datasets": False,
                                   "engine.build.run": False}
        assert found["frozen"] == 0
