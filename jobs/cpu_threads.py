"""Torch's CPU threads in the processes that train: waiting threads sleep, and each job gets its share of the cores.

torch computes on the CPU with OpenMP threads (libgomp in torch's Linux wheels). By default an OpenMP
thread that waits at the end of a parallel region spins for about 3 ms (libgomp's ``GOMP_SPINCOUNT``
300000) before it sleeps, and every thread that calls into torch has a thread team of its own (one per
agent thread, :mod:`engine.trainer.agents`). On a machine whose cores are busy with other work (the
dashboard, another job, an evaluation) the spinning threads take the cores from the threads they wait
for: a tiny one-agent run beside two busy processes on 2 cores took 458 s by default and 5.5 s with
passive waiting, with the same results bit for bit (``python -m bench.busy_machine``).

So a worker (its job processes fork from it) and ``cooplab train`` call :func:`configure_threads`
before torch is imported:

- ``OMP_WAIT_POLICY=PASSIVE`` (a waiting thread sleeps at once) unless the operator set
  ``OMP_WAIT_POLICY``; libgomp reads it once, when torch loads it, so it cannot be changed later;
- ``OMP_NUM_THREADS`` = the torch threads of one job (:func:`thread_plan`): ``COOPLAB_JOB_THREADS``,
  else the operator's ``OMP_NUM_THREADS``, else the cores this process may use (its CPU affinity and
  cgroup CPU quota, :func:`available_cores`) divided by the worker's ``--slots``. The trainer divides a
  job's threads among the agents that compute at once (:func:`engine.trainer.threads.agent_thread_share`),
  so all the threads add up to the worker's cores.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
THREADS_ENV = "OMP_NUM_THREADS"
SETTING_ENV = "COOPLAB_JOB_THREADS"


@dataclass(frozen=True)
class ThreadPlan:
    """The torch threads of one job and the OpenMP variables that give them to it."""

    threads: int
    """torch intra-op threads per job process (shared by the agents that compute at once)."""
    source: str
    """Where the count comes from: ``COOPLAB_JOB_THREADS``, ``OMP_NUM_THREADS`` or ``C cores / S slots``."""
    wait_policy: str
    """The OpenMP wait policy the job's threads use (``PASSIVE`` unless the operator chose another)."""
    env: dict[str, str] = field(default_factory=dict)
    """The variables to set before torch loads (those the operator did not set, and the count)."""
    oversubscribed: bool = False
    """Whether ``threads`` x slots exceeds the cores (an operator's explicit choice)."""

    def describe(self) -> str:
        waiting = "sleep when they wait" if self.wait_policy.upper() == "PASSIVE" else \
            f"wait with OMP_WAIT_POLICY={self.wait_policy}"
        return f"{self.threads} torch thread(s) per job ({self.source}); OpenMP threads {waiting}"


def parse_thread_count(value: str, name: str = THREADS_ENV) -> int | None:
    """The thread count in an ``OMP_NUM_THREADS``-style value: ``"4"`` -> 4, ``"4,2"`` (nested levels) -> 4,
    empty -> None; anything else is a ``ValueError`` naming the variable and the fix."""
    text = value.strip()
    if not text:
        return None
    first = text.split(",", 1)[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise ValueError(f"{name}={value!r} is not a whole number of threads (1 or more); set e.g. {name}=2, or unset "
                         f"it to give each job its share of the cores")
    return int(first)


def thread_plan(*, cores: int, slots: int = 1, job_threads: int | None = None,
                environ: Mapping[str, str] | None = None) -> ThreadPlan:
    """The torch threads of each of ``slots`` jobs run at once on ``cores`` cores (pure).

    ``job_threads`` (the ``COOPLAB_JOB_THREADS`` setting) wins; else an ``OMP_NUM_THREADS`` in
    ``environ`` (the operator's); else ``cores // slots``, at least 1. ``OMP_WAIT_POLICY`` in
    ``environ`` is kept, else it becomes ``PASSIVE``."""
    if cores < 1 or slots < 1:
        raise ValueError(f"cores ({cores}) and slots ({slots}) must be at least 1")
    environ = {} if environ is None else environ
    env: dict[str, str] = {}
    operator_threads = parse_thread_count(environ.get(THREADS_ENV, ""))
    if job_threads is not None:
        if job_threads < 1:
            raise ValueError(f"{SETTING_ENV}={job_threads} must be at least 1 (torch threads per job)")
        threads, source = job_threads, SETTING_ENV
    elif operator_threads is not None:
        threads, source = operator_threads, THREADS_ENV
    else:
        threads, source = max(1, cores // slots), f"{cores} core(s) / {slots} slot(s)"
    if operator_threads != threads:
        env[THREADS_ENV] = str(threads)
    wait_policy = environ.get(WAIT_POLICY_ENV, "").strip()
    if not wait_policy:
        wait_policy = env[WAIT_POLICY_ENV] = "PASSIVE"
    return ThreadPlan(threads=threads, source=source, wait_policy=wait_policy, env=env,
                      oversubscribed=threads * slots > cores)


def cgroup_cpu_limit(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup in cores (``docker --cpus``, a Kubernetes CPU limit), or
    None when there is none: cgroup v2's ``cpu.max``, else v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``."""
    try:
        if (root / "cpu.max").is_file():
            quota, period = (root / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        v1 = root / "cpu"
        if (v1 / "cpu.cfs_quota_us").is_file():
            quota_us = int((v1 / "cpu.cfs_quota_us").read_text())
            return None if quota_us <= 0 else quota_us / int((v1 / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None


def available_cores() -> int:
    """The cores this process may use: its CPU affinity (``taskset``, a cpuset), capped by a cgroup CPU
    quota rounded up."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpu_limit()
    return max(1, min(cores, math.ceil(limit))) if limit else max(1, cores)


def configure_threads(job_threads: int | None = None, *, slots: int = 1,
                      environ: MutableMapping[str, str] | None = None) -> ThreadPlan:
    """Set this process's OpenMP variables by :func:`thread_plan` (``job_threads``: the
    ``COOPLAB_JOB_THREADS`` setting) before torch loads, so the processes it forks or starts compute
    with them. Where torch is already imported (an in-process call, a test) only torch's thread count
    follows the plan: the wait policy was fixed when torch loaded, and the environment is left alone."""
    environ = os.environ if environ is None else environ
    plan = thread_plan(cores=available_cores(), slots=slots, job_threads=job_threads, environ=environ)
    torch: Any = sys.modules.get("torch")
    if torch is None:
        environ.update(plan.env)
    elif torch.get_num_threads() != plan.threads:
        torch.set_num_threads(plan.threads)
    if plan.oversubscribed:
        log.warning("%s x %d slot(s) is more threads than the %d core(s) this worker may use", plan.describe(), slots,
                    available_cores())
    else:
        log.info("%s", plan.describe())
    return plan
