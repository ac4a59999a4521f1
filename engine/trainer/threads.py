"""Running per-agent work concurrently: one worker thread per agent.

Agents on different devices (GPUs, or CPU cores) sample and update at the same time; torch
releases the GIL inside its kernels, so the threads overlap wherever the work is tensor arithmetic.
``parallel_training="mp"`` always runs the agents in threads (on the devices the user listed);
``"auto"`` (the default) does when that is exact and faster (:func:`runs_concurrently`); ``"none"``
never does (CoMLRL's sequential loop). A trainer makes its threads once (:func:`agent_threads`);
:func:`engine.trainer.agents.map_agents` runs each agent's work on them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch


class AgentThreads(ThreadPoolExecutor):
    """A trainer's worker threads, one per agent. ``auto`` pools step aside (the agents run one after
    another) whenever torch has fewer intra-op threads than there are CPU agents at the time of a
    call, so a later ``torch.set_num_threads(1)`` never oversubscribes a core."""

    def __init__(self, num_agents: int, *, auto: bool) -> None:
        super().__init__(max_workers=num_agents, thread_name_prefix="agent")
        self.auto = auto


def runs_concurrently(mode: str, devices: Sequence[Any], *, cpu_threads: int) -> bool:
    """Whether a team on ``devices`` (one per agent) runs its agents in threads under ``mode``.

    ``mp``: yes, with two or more agents. ``none``: no. ``auto``: when it is exact and faster, which
    is when every agent has compute of its own: the agents on the CPU get at least one intra-op
    thread each (``cpu_threads`` >= their number) and no accelerator holds two agents (their kernels
    would queue on the device anyway). ``auto`` places the whole team on one device, as ``none``
    does, so on a GPU it runs the agents one after another; ``mp`` spreads them over devices.
    Exact because each agent's sampling and update read only its own model, generator and
    optimizer: a concurrent run equals the sequential run with the same threads per agent bit for
    bit (the matrix products of a thread share may round differently from those of all threads,
    as with any change of ``torch.set_num_threads``)."""
    if len(devices) < 2 or mode == "none":
        return False
    if mode == "mp":
        return True
    kinds = [str(d) for d in devices]
    accelerators = [d for d in kinds if not d.startswith("cpu")]
    cpu_agents = len(kinds) - len(accelerators)
    return len(set(accelerators)) == len(accelerators) and (cpu_agents < 2 or cpu_threads >= cpu_agents)


def draws_while_training(model: Any) -> bool:
    """Whether ``model``'s training forward draws random numbers (dropout with p > 0, attention dropout,
    a LoRA adapter's dropout). Those draws come from torch's process-wide generator, so two agents
    updating in threads would interleave them by timing and a seeded run would not repeat."""
    if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return True
    model_config = getattr(model, "config", None)  # transformers': the name varies by architecture
    return any(float(getattr(model_config, name, 0.0) or 0.0) > 0 for name in ("attention_dropout", "attn_pdrop"))


def agent_threads(mode: str, devices: Sequence[Any], models: Sequence[Any]) -> AgentThreads | None:
    """The worker threads for a team of ``models`` on ``devices`` under ``mode`` (None: agents one
    after another). Agents that share a model object always take turns; ``auto`` also leaves
    threads out when an agent's training draws random numbers (:func:`draws_while_training`), which
    keeps seeded runs repeatable (``mp`` runs such agents in threads, in a timing-dependent order)."""
    if mode == "fsdp":  # the agents are sharded over ranks (engine.distributed.trainer), not run in threads
        return None
    if len({id(m) for m in models}) < len(models):
        return None
    if mode == "auto" and any(draws_while_training(m) for m in models):
        return None
    if not runs_concurrently(mode, devices, cpu_threads=torch.get_num_threads()):
        return None
    return AgentThreads(len(devices), auto=mode == "auto")


def agent_thread_share(threads: int, concurrent: int) -> int:
    """The intra-op threads each of ``concurrent`` agents computing on the CPU at once gets out of
    ``threads`` (a job's, ``jobs.cpu_threads``): an equal share, at least one; all of them for one agent.
    The shares never add up to more than ``threads`` when there are at least as many threads as agents
    (``auto`` runs agents in threads only then, :func:`runs_concurrently`)."""
    return max(1, threads // concurrent) if concurrent > 1 else threads


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
    share = agent_thread_share(before, concurrent)
    if share != before:
        torch.set_num_threads(share)
    try:
        yield share
    finally:
        if share != before:
            torch.set_num_threads(before)
