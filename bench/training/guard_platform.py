"""The platform the learning guard's numbers were recorded on: what bit-for-bit repeatability depends on."""

from __future__ import annotations

import contextlib
import platform
from typing import Any


def platform_record() -> dict[str, Any]:
    """What bit-for-bit repeatability depends on: the torch and transformers versions, the CPU and the
    instruction set torch dispatches to, and the torch threads the guard computes on."""
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cpu": cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_flags": cpu_flags(), "torch_threads": 1}


MATCHED = ("torch", "transformers", "machine", "cpu", "cpu_capability", "cpu_flags", "torch_threads")
FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_bf16",
         "amx_tile")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (the processor name elsewhere)."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def cpu_flags() -> list[str]:
    """The vector-instruction flags of /proc/cpuinfo that decide torch's kernels (:data:`FLAGS`)."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("flags"):
                present = set(line.split(":", 1)[1].split())
                return [flag for flag in FLAGS if flag in present]
    return []


def platform_mismatch(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The platform fields (of :data:`MATCHED`) that differ, as ``name: recorded -> current``."""
    return [f"{k}: {recorded.get(k)!r} -> {current.get(k)!r}" for k in MATCHED if recorded.get(k) != current.get(k)]
