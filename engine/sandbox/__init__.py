"""Run model-written code behind an OS boundary (never in the trainer or worker process).

``run_python(code, limits=SandboxLimits(...))`` runs one program; ``run_function_tests`` judges a
candidate function against trusted tests from a separate process; ``SandboxPool`` runs many with a
bounded number at a time. Each program runs under bubblewrap in its own user, PID, network, IPC and
mount namespaces over a minimal read-only root, with wall-clock, CPU, memory, process-count and
file-size limits (:mod:`engine.sandbox.boundary`); without isolation, code is refused.
"""

from engine.sandbox.boundary import SandboxUnavailable, require_isolation
from engine.sandbox.identity import kill_uid_processes
from engine.sandbox.judged import FunctionTests, Verdict, run_function_tests
from engine.sandbox.limits import SandboxLimits, SandboxResult
from engine.sandbox.pool import SandboxPool, default_workers
from engine.sandbox.runner import classify, run_python

__all__ = [
    "FunctionTests",
    "SandboxLimits",
    "SandboxPool",
    "SandboxResult",
    "SandboxUnavailable",
    "Verdict",
    "classify",
    "default_workers",
    "kill_uid_processes",
    "require_isolation",
    "run_function_tests",
    "run_python",
]
