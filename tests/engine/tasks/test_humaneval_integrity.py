"""The code reward on all 164 problems: every canonical solution earns full test credit, and one
universal object (equal to everything, any attribute, any call) earns none.

Both are scored once, in a torch-free process of their own (``tests/engine/tasks/humaneval_scores.py``
says why), through the real sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def scored() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, "-m", "tests.engine.tasks.humaneval_scores"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=540)  # under pytest-timeout's 600 s
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_every_canonical_solution_gets_full_credit(scored):
    failed = [task_id for task_id, value in zip(scored["task_ids"], scored["canonical_tests"], strict=True)
              if value != 1.0]
    assert len(scored["task_ids"]) == 164 and len(set(scored["task_ids"])) == 164 and failed == []


@pytest.mark.slow
def test_a_universal_object_gets_no_credit_anywhere(scored):
    assert len(scored["universal_tests"]) == 164
    assert sum(scored["universal_tests"]) == 0.0
    assert set(scored["universal_totals"]) == {1.5}  # structure and syntax only
