"""A run's resource use over time, recorded by its job as metrics (``resources/...``).

While a run trains, a thread of its job process samples, every ``COOPLAB_RESOURCE_INTERVAL_S``
seconds (default 15; 0 turns it off) and once more when training ends, and writes through the run's
metrics path, so the run page charts them (a "resources" section, by step and by wall time) and the
metric downloads hold them:

- ``resources/cpu_percent``: CPU use of the job's process tree (the job process and its children:
  torchrun ranks, sandboxed reward code), 100 = one core busy;
- ``resources/rss_mib``: the resident memory of that tree (the sum of each process's resident set);
- ``resources/gpu_util_percent`` and ``resources/gpu_memory_mib``, on a GPU run only: NVML's
  utilisation of the run's GPUs (the mean; the whole device, other processes included) and the memory
  the tree's processes hold on them (``nvidia-ml-py``, the ``gpu`` extra); without NVML, the memory
  torch reserved in the job process when it initialised CUDA (no utilisation).

A sample costs well under a millisecond of CPU (psutil reads ``/proc``); a failed write is logged and
the next sample tried: resource metrics never stop training. :func:`tree_sample` is the pure part.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

import psutil

log = logging.getLogger(__name__)

PREFIX = "resources/"
MIB = 1024 * 1024


def tree_sample(processes: Iterable[Any]) -> dict[str, float]:
    """CPU percent (since each process's previous call; 100 = one core) and resident MiB summed over
    ``processes`` (psutil ``Process`` objects); processes that exited are skipped."""
    cpu = rss = 0.0
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            cpu += proc.cpu_percent(interval=None)
            rss += proc.memory_info().rss
    return {f"{PREFIX}cpu_percent": round(cpu, 2), f"{PREFIX}rss_mib": round(rss / MIB, 2)}


def visible_gpus(value: str | None, count: int) -> list[int | str]:
    """The GPUs a process may use, from ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs; unset: all ``count``)."""
    if value is None:
        return list(range(count))
    out: list[int | str] = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        if part.isdigit():
            if int(part) >= count:
                break  # CUDA stops at the first invalid entry
            out.append(int(part))
        else:
            out.append(part)
    return out


class _Nvml:
    """The run's GPUs through NVML: utilisation (device-wide) and the memory the given pids hold."""

    def __init__(self) -> None:
        import pynvml  # the gpu extra: ImportError when it is not installed

        pynvml.nvmlInit()
        self.nvml = pynvml
        wanted = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), pynvml.nvmlDeviceGetCount())
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(w) if isinstance(w, int)
                        else pynvml.nvmlDeviceGetHandleByUUID(w) for w in wanted]

    def sample(self, pids: set[int]) -> dict[str, float]:
        nvml, utils, memory, device_used = self.nvml, [], 0, 0
        for handle in self.handles:
            utils.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            device_used += nvml.nvmlDeviceGetMemoryInfo(handle).used
            with contextlib.suppress(nvml.NVMLError):
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if proc.pid in pids and proc.usedGpuMemory:
                        memory += proc.usedGpuMemory
        if not utils:
            return {}
        # NVML cannot see the pids of another PID namespace (a container): the devices' memory then
        return {f"{PREFIX}gpu_util_percent": round(sum(utils) / len(utils), 2),
                f"{PREFIX}gpu_memory_mib": round((memory or device_used) / MIB, 2)}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()


def _torch_gpu_memory() -> dict[str, float]:
    """The memory torch reserved on this process's GPUs, when it has initialised CUDA (never here)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return {}
    reserved = sum(torch.cuda.memory_reserved(i) for i in range(torch.cuda.device_count()))
    return {f"{PREFIX}gpu_memory_mib": round(reserved / MIB, 2)}


class ResourceSampler:
    """Samples the process tree of ``pid`` (default: this process) every ``interval_s`` seconds on a
    daemon thread, and once more on :meth:`stop`, handing each sample to ``write`` (a dict of
    ``resources/...`` values). ``gpu``: also sample the run's GPUs."""

    def __init__(self, write: Callable[[dict[str, float]], None], *, interval_s: float, gpu: bool = False,
                 pid: int | None = None) -> None:
        self.write = write
        self.interval_s = float(interval_s)
        self.root = psutil.Process(pid or os.getpid())
        self._procs: dict[int, Any] = {}
        self._gpu = gpu
        self._nvml: _Nvml | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = 0

    def _tree(self) -> list[Any]:
        """The root and its living descendants, each the same ``Process`` object from sample to sample
        (psutil keeps the previous CPU times in it)."""
        try:
            found = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            found = [self.root]
        alive = {p.pid: self._procs.get(p.pid, p) for p in found}
        self._procs = alive
        return list(alive.values())

    def sample(self) -> dict[str, float]:
        """One sample of every value this run has (see the module docstring)."""
        procs = self._tree()
        values = tree_sample(procs)
        if self._gpu:
            if self._nvml is not None:
                with contextlib.suppress(Exception):
                    values.update(self._nvml.sample({p.pid for p in procs}))
            else:
                values.update(_torch_gpu_memory())
        return values

    def _emit(self) -> None:
        try:
            self.write(self.sample())
        except Exception as exc:  # never fatal: the next sample tries again
            self._failures += 1
            if self._failures == 1:
                log.warning("resource metrics could not be written (%s); trying again at the next sample", exc)

    def start(self) -> None:
        """Take the CPU baseline now and start sampling (nothing when ``interval_s`` is 0)."""
        if self.interval_s <= 0 or self._thread is not None:
            return
        if self._gpu:
            try:
                self._nvml = _Nvml()
            except Exception as exc:  # no NVML here (not installed, no driver): torch's memory instead
                log.info("GPU utilisation not recorded: NVML is not available (%s)", exc)
        tree_sample(self._tree())  # the first cpu_percent of a process is its baseline
        self._thread = threading.Thread(target=self._loop, name="resource-metrics", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._halt.wait(self.interval_s):
            self._emit()

    def stop(self) -> None:
        """Stop sampling, after one last sample (the end of the run)."""
        if self._thread is None:
            return
        self._halt.set()
        self._thread.join(timeout=10.0)
        self._thread = None
        self._emit()
        if self._nvml is not None:
            self._nvml.close()


__all__ = ["PREFIX", "ResourceSampler", "tree_sample", "visible_gpus"]
