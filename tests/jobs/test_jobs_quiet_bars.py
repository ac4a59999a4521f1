"""A worker's jobs print no progress bars: Celery logs whatever a job process writes to stderr as WARNING
lines, so tqdm bars (Hugging Face's and any other) showed up as warnings. tqdm and huggingface_hub read
their switches when imported, so the worker sets them before it preloads the engine."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

from jobs import worker

BARS = """
from jobs.worker import quiet_progress_bars
quiet_progress_bars()
import huggingface_hub.utils, tqdm  # what the worker's preload imports, after the switches
for _ in tqdm.tqdm(range(3), desc="a job's bar"): pass
for _ in huggingface_hub.utils.tqdm(range(3), desc="a download"): pass
print("trained")
"""


def test_job_processes_print_no_progress_bars() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")}
    out = subprocess.run([sys.executable, "-c", BARS], capture_output=True, text=True, env=env, timeout=60,
                         check=True)
    assert out.stdout == "trained\n" and out.stderr == ""  # nothing for Celery to log as WARNING
    # and the worker sets the switches before its preload imports tqdm (set after it, they did nothing)
    source = inspect.getsource(worker.start_worker)
    assert source.index("quiet_progress_bars()") < source.index("preload_engine(")
