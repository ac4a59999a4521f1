"""Systems of trainers: several MAGRPO-family trainers playing one task, updated on a schedule.

``engine.systems.spec`` (the config schema) and ``engine.systems.schedule`` are torch-free; the
other modules load the training stack.
"""

from __future__ import annotations

from engine.lazy import lazy_exports

_EXPORTS = {
    "System": "engine.systems.system",
    "SystemRollout": "engine.systems.system",
    "deferred_reward": "engine.systems.system",
    "build_system": "engine.systems.from_config",
    "run_system": "engine.systems.from_config",
    "SystemSpec": "engine.systems.spec",
    "parse_system_spec": "engine.systems.spec",
    "AllTogether": "engine.systems.schedule",
    "Alternating": "engine.systems.schedule",
    "RoundRobin": "engine.systems.schedule",
    "EveryK": "engine.systems.schedule",
    "Custom": "engine.systems.schedule",
    "ScheduleError": "engine.systems.schedule",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
