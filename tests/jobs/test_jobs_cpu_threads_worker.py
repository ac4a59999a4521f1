"""A real worker's job processes compute with passive OpenMP waiting and their share of the cores: read from
libgomp itself (``OMP_DISPLAY_ENV=VERBOSE`` prints what it read when torch loaded it, in the worker parent that
preloads torch and forks the job processes)."""

from __future__ import annotations

import re

import pytest

from jobs.cpu_threads import available_cores

pytestmark = [pytest.mark.integration]


def test_a_worker_with_two_slots_loads_torch_with_sleeping_threads_and_half_the_cores(jobs_env, start_worker):
    worker = start_worker("cpu", "--slots", "2",
                          env_changes={"OMP_NUM_THREADS": None, "OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None,
                                       "COOPLAB_JOB_THREADS": None, "OMP_DISPLAY_ENV": "VERBOSE"})
    seen = dict(re.findall(r"^\s+(OMP_NUM_THREADS|OMP_WAIT_POLICY|GOMP_SPINCOUNT) = '([^']*)'", worker.log(), re.M))
    assert seen == {"OMP_NUM_THREADS": str(max(1, available_cores() // 2)), "OMP_WAIT_POLICY": "PASSIVE",
                    "GOMP_SPINCOUNT": "0"}, worker.log()  # before: torch's defaults, all cores and 300000 spins
    assert len(worker.job_pids()) == 2  # the job processes, forked from it
