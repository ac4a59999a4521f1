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
    """``fn(agent)`` for every agent, in order: on the pool's threads when there is one."""
    if pool is None:
        return [fn(agent) for agent in agents]
    with split_cpu_threads(sum(agent.device.type == "cpu" for agent in agents)):
        return list(pool.map(fn, agents))


@contextlib.contextmanager
def split_cpu_threads(concurrent: int) -> Iterator[None]:
    """While ``concurrent`` agents compute on the CPU at once (``mp`` with CPU devices), give each an
    equal share of torch's intra-op threads instead of letting every agent start a full thread team
    (oversubscribed cores spin instead of computing). Restores the setting afterwards."""
    before = torch.get_num_threads()
    share = max(1, before // concurrent) if concurrent > 1 else before
    if share != before:
        torch.set_num_threads(share)
    try:
        yield
    finally:
        if share != before:
            torch.set_num_threads(before)
