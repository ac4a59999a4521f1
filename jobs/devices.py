"""Device names a worker can serve, each its own queue (:mod:`jobs.celery_app`): ``cpu``, one GPU
``cuda:N``, or a set of GPUs ``cuda:0,1,2,3`` that one worker owns together.

A GPU set is what a run of several ranks (``parallel_training: fsdp``, ``fsdp_ranks: N``) needs: its
job launches one rank per GPU of the set, so it goes to a set's queue and the worker that owns the
set takes it. The name is canonical (indices ascending, no repeats), so that a worker and a submit
that mean the same GPUs name the same queue.

Apart from the Celery app so that checking a device name (``cooplab submit`` does it first) loads no
broker client."""

from __future__ import annotations

import re

_DEVICE_RE = re.compile(r"\A(cpu|cuda:\d+(,\d+)*)\Z")

MAX_DEVICE_NAME = 100
"""The longest device name (the store's queue column holds 100 characters)."""


def validate_device(device: str) -> str:
    """Return ``device`` if it names a queue a worker can serve, else raise ``ValueError`` saying what
    is accepted: ``cpu``, ``cuda:N``, or a set of GPUs ``cuda:N,M,...`` in ascending order."""
    if not isinstance(device, str) or not _DEVICE_RE.match(device) or len(device) > MAX_DEVICE_NAME:
        raise ValueError(f"device must be 'cpu' or 'cuda:N' (e.g. 'cuda:0'), or a set of GPUs 'cuda:N,M,...' "
                         f"(e.g. 'cuda:0,1,2,3', at most {MAX_DEVICE_NAME} characters), got {device!r}")
    gpus = [int(i) for i in device.partition(":")[2].split(",")] if device != "cpu" else []
    if gpus != sorted(set(gpus)):
        canonical = f"cuda:{','.join(str(i) for i in sorted(set(gpus)))}"
        raise ValueError(f"device {device!r}: list each GPU once, in ascending order ({canonical!r}), so that a "
                         "worker and the runs for it name the same queue")
    return device


def device_gpus(device: str) -> tuple[int, ...]:
    """The GPU indices a device's worker owns: ``()`` for ``cpu``, ``(3,)`` for ``cuda:3``,
    ``(0, 1, 2, 3)`` for ``cuda:0,1,2,3``."""
    device = validate_device(device)
    return () if device == "cpu" else tuple(int(i) for i in device.partition(":")[2].split(","))


def job_device(queue: str) -> str:
    """The torch device a job on ``queue`` trains on inside its worker: ``cpu``, else ``cuda:0`` (the worker
    shows only its own GPUs, renumbered from 0: ``CUDA_VISIBLE_DEVICES``)."""
    return "cpu" if queue == "cpu" else "cuda:0"


def rank_gpus(visible: str, nproc: int) -> str:
    """``CUDA_VISIBLE_DEVICES`` for ``nproc`` ranks launched from a job that sees ``visible`` (the
    worker's own ``CUDA_VISIBLE_DEVICES``, e.g. ``"4,5,6,7"``): its first ``nproc`` GPUs, so rank
    ``LOCAL_RANK`` trains on the job's GPU number ``LOCAL_RANK`` (``cuda:<LOCAL_RANK>`` inside the rank)
    and GPUs beyond the run's ranks stay untouched. Raises ``ValueError`` when ``visible`` names fewer."""
    gpus = [part.strip() for part in visible.split(",") if part.strip()]
    if nproc > len(gpus):
        raise ValueError(f"{nproc} ranks, but this job sees {len(gpus)} GPU(s) (CUDA_VISIBLE_DEVICES={visible!r})")
    return ",".join(gpus[:nproc])
