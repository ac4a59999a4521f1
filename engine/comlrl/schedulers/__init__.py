"""CoMLRL's ``comlrl.schedulers``."""

from engine.comlrl.schedulers.device_scheduler import DeviceScheduler, normalize_parallel_training

__all__ = ["DeviceScheduler", "normalize_parallel_training"]
