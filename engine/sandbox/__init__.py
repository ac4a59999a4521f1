"""Run model-written code in a separate, limited process (never in the trainer or worker process).

``run_python(code, limits=SandboxLimits(...))`` runs one program; ``SandboxPool`` runs many with a
bounded number at a time. Each run gets a fresh temporary working directory, a minimal environment,
wall-clock, CPU, memory, process-count and file-size limits, and no network.
"""

from engine.sandbox.limits import SandboxLimits, SandboxResult
from engine.sandbox.pool import SandboxPool, default_workers
from engine.sandbox.runner import classify, kill_uid_processes, network_namespace_available, run_python

__all__ = [
    "SandboxLimits",
    "SandboxPool",
    "SandboxResult",
    "classify",
    "default_workers",
    "kill_uid_processes",
    "network_namespace_available",
    "run_python",
]
