"""Run many sandboxed programs in parallel with a bounded number of processes at a time."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from engine.sandbox.judged import FunctionTests, Verdict, run_function_tests
from engine.sandbox.limits import SandboxLimits, SandboxResult
from engine.sandbox.runner import run_python


def default_workers() -> int:
    """One sandbox per available CPU core, at least one."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # platforms without affinity masks
        return max(1, os.cpu_count() or 1)


class SandboxPool:
    """At most ``max_workers`` sandboxes run at once; results come back in input order.

    Threads only wait on child processes, so the pool adds no Python work to the caller while the
    programs run. The pool is reusable and safe to share; ``close`` releases its threads.
    """

    def __init__(self, max_workers: int | None = None, *, limits: SandboxLimits | None = None) -> None:
        self.max_workers = max_workers or default_workers()
        if self.max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {self.max_workers}")
        self.limits = limits or SandboxLimits()
        self._executor = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="sandbox")

    def run(self, code: str, *, files: dict[str, str] | None = None) -> SandboxResult:
        """Run one program (blocking)."""
        return self._executor.submit(run_python, code, limits=self.limits, files=files).result()

    def run_many(self, programs: Sequence[str], *, files: dict[str, str] | None = None) -> list[SandboxResult]:
        """Run every program, ``max_workers`` at a time, and return their results in order."""
        futures = [self._executor.submit(run_python, code, limits=self.limits, files=files) for code in programs]
        return [future.result() for future in futures]

    def judge_many(
        self, programs: Sequence[str], tests: Sequence[FunctionTests], *, step_timeout_s: float = 3.0
    ) -> list[Verdict]:
        """Judge every program against its tests (:func:`run_function_tests`), in order."""
        futures = [
            self._executor.submit(run_function_tests, program, suite, limits=self.limits, step_timeout_s=step_timeout_s)
            for program, suite in zip(programs, tests, strict=True)
        ]
        return [future.result() for future in futures]

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
