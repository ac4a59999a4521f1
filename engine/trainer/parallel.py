"""Running per-agent work concurrently (``parallel_training="mp"``): one worker thread per agent.

Agents on different devices (GPUs, or CPU cores) sample and update at the same time; torch
releases the GIL inside its kernels, so the threads overlap wherever the work is tensor arithmetic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch


def map_agents(fn: Callable[[Any], Any], agents: Sequence[Any], pool: ThreadPoolExecutor | None) -> list[Any]:
    """``fn(agent)`` for every agent, in order: on the pool's threads when there is one, each thread
    computing with its share of torch's intra-op threads (:func:`split_cpu_threads`)."""
    if pool is None:
        return [fn(agent) for agent in agents]
    with split_cpu_threads(sum(agent.device.type == "cpu" for agent in agents)) as share:

        def run(agent: Any) -> Any:
            # the intra-op thread count is per calling thread (OpenMP): set it in the worker itself
            if torch.get_num_threads() != share:
                torch.set_num_threads(share)
            return fn(agent)

        return list(pool.map(run, agents))


@contextlib.contextmanager
def split_cpu_threads(concurrent: int) -> Iterator[int]:
    """While ``concurrent`` agents compute on the CPU at once (``mp`` with CPU devices), give each an
    equal share of torch's intra-op threads instead of letting every agent start a full thread team
    (oversubscribed cores spin instead of computing). Yields the share; restores the calling
    thread's setting afterwards.

    Matrix products may split their work differently with fewer threads, so a parallel run equals
    a sequential run with the same number of threads per agent bit for bit, and a sequential run
    with more threads only up to rounding."""
    before = torch.get_num_threads()
    share = max(1, before // concurrent) if concurrent > 1 else before
    if share != before:
        torch.set_num_threads(share)
    try:
        yield share
    finally:
        if share != before:
            torch.set_num_threads(before)
