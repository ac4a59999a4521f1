"""Systems of trainers: several MAGRPO-family trainers playing one task, updated on a schedule.

``engine.schema.system_spec`` (the config schema) and ``engine.systems.schedule`` are torch-free; the
other modules load the training stack.
"""

from __future__ import annotations

from engine.lazy import lazy_exports

# module -> the public names it defines
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "engine.systems.system": ("System", "SystemRollout", "deferred_reward"),
    "engine.systems.from_config": ("build_system", "run_system"),
    "engine.schema.system_spec": ("SystemSpec", "parse_system_spec"),
    "engine.systems.schedule": ("AllTogether", "Alternating", "RoundRobin", "EveryK", "Custom",
        "ScheduleError"),
})
