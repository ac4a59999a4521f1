"""Host and GPU utilisation for the Workers view: psutil for CPU/RAM, pynvml for GPUs when present."""

from __future__ import annotations

from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class HostStats:
    """CPU and memory use of the machine the dashboard runs on."""

    cpu_percent: float
    cpu_count: int
    ram_used_gb: float
    ram_total_gb: float
    ram_percent: float


@dataclass(frozen=True)
class GpuStats:
    """One GPU as NVML reports it."""

    index: int
    name: str
    util_percent: float
    mem_used_gb: float
    mem_total_gb: float
    temperature_c: float | None


def host_stats() -> HostStats:
    """CPU load since the last call (non-blocking) and memory in use."""
    memory = psutil.virtual_memory()
    gib = 1024**3
    return HostStats(
        cpu_percent=psutil.cpu_percent(interval=None),
        cpu_count=psutil.cpu_count() or 1,
        ram_used_gb=(memory.total - memory.available) / gib,
        ram_total_gb=memory.total / gib,
        ram_percent=memory.percent,
    )


def gpu_stats() -> tuple[list[GpuStats], str | None]:
    """GPUs through pynvml; an empty list and the reason when NVML is not available here."""
    try:
        import pynvml
    except ImportError:
        return [], "pynvml is not installed (pip install 'cooplab[gpu]' on GPU machines)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVML raises its own error types when no driver is present
        return [], f"no NVIDIA driver answered ({exc})"
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            util = pynvml.nvmlDeviceGetUtilizationRates(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                temp = float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))
            except Exception:
                temp = None
            gpus.append(GpuStats(index, name.decode() if isinstance(name, bytes) else str(name),
                                 float(util.gpu), memory.used / 1024**3, memory.total / 1024**3, temp))
        return gpus, None
    finally:
        pynvml.nvmlShutdown()
