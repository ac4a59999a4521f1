"""CoMLRL's ``comlrl.schedulers.device_scheduler``: parallel modes and device lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def normalize_parallel_training(mode: object) -> str:
    """CoMLRL's modes: ``none`` (``null`` too) or ``mp``. CoopLab's configs also take ``auto`` (their
    default); an ``engine.comlrl`` trainer runs it as CoopLab does."""
    value = str(mode).strip().lower()
    value = "none" if value == "null" else value
    if value not in {"none", "mp", "auto"}:
        raise ValueError("parallel_training only supports: none, mp (and CoopLab's auto).")
    return value


class DeviceScheduler:
    """Device lists as CoMLRL resolves them."""

    @staticmethod
    def resolve_devices(spec: Any, num_devices: int, *, kind: str = "devices") -> list[torch.device]:
        """``num_devices`` devices from one device, a list of 1 or ``num_devices``, or None/"auto"."""
        if num_devices < 1:
            raise ValueError(f"{kind} count must be >= 1.")
        if spec is None or (isinstance(spec, str) and spec.lower() == "auto"):
            return DeviceScheduler._auto_devices(num_devices)
        if isinstance(spec, str):
            return [torch.device(spec)] * num_devices
        if isinstance(spec, Sequence):
            if len(spec) == 0:
                raise ValueError(f"{kind} must be a non-empty list or 'auto'.")
            if len(spec) == 1:
                return [torch.device(spec[0])] * num_devices
            if len(spec) != num_devices:
                raise ValueError(f"{kind} length ({len(spec)}) must be 1 or {num_devices}.")
            return [torch.device(s) for s in spec]
        raise ValueError(f"Unsupported {kind} spec: {spec!r}.")

    @staticmethod
    def resolve_single_device(*specs: Any) -> torch.device:
        """The first device any of ``specs`` names, else CUDA when available, else the CPU."""
        for spec in specs:
            if spec is None:
                continue
            first = spec if isinstance(spec, str) else (spec[0] if spec else None)
            if first is None:
                raise ValueError("Device spec list must be non-empty.")
            return DeviceScheduler._auto_devices(1)[0] if str(first).lower() == "auto" else torch.device(first)
        return DeviceScheduler._auto_devices(1)[0]

    @staticmethod
    def _auto_devices(num_devices: int) -> list[torch.device]:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count < 1:
            return [torch.device("cpu")] * num_devices
        if count < num_devices:
            return [torch.device("cuda:0")] * num_devices
        return [torch.device(f"cuda:{i}") for i in range(num_devices)]
