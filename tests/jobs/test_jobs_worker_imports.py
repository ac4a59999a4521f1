"""A worker's own start and a job's own modules import only what they use: without the preload
(``COOPLAB_WORKER_PRELOAD=false``) the worker parent holds no torch, transformers or datasets; a database
at the head revision is checked without alembic; and with no artifact store URL nothing loads boto3.
(With the preload on, ``transformers.modeling_utils`` itself imports accelerate, which imports boto3
where it is installed: that is the preload's cost, measured in docs/jobs.md.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.jobs.helpers import ROOT

DEFERRED = ("torch", "transformers", "datasets", "pandas", "alembic", "boto3", "botocore")

_START_AND_JOB_MODULES = """
import json, sys
from jobs.settings import Settings
from jobs.worker import prepare_worker, preload_engine
import jobs.tasks, jobs.maintenance, jobs.executor, jobs.db_sink
from jobs.artifacts import open_store

settings = Settings()
prepare_worker(settings, "imports-test@host")
assert preload_engine(settings) is None
open_store(settings)
print(json.dumps(sorted(m for m in {deferred!r} if m in sys.modules)))
"""


def test_a_worker_start_and_a_jobs_modules_import_nothing_they_defer(jobs_env):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COOPLAB_WORKER_PRELOAD": "false", "COOPLAB_ARTIFACTS_URL": ""}
    result = subprocess.run([sys.executable, "-c", _START_AND_JOB_MODULES.format(deferred=DEFERRED)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
