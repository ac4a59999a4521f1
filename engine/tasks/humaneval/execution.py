"""Running a joint program against a problem's tests, only ever inside the sandbox.

The program runs in one sandboxed process that answers calls of its entry point; the problem's
tests run in another that holds the test code (and the problem's own prompt, whose helpers some
tests use) and receives only plain values (:mod:`engine.sandbox.judged`). Checks passed before the
wall clock cut a program off keep their credit; a program that never defines its function scores
zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.sandbox import FunctionTests, SandboxLimits, SandboxPool, Verdict
from engine.tasks.humaneval.problems import TestPlan


@dataclass(frozen=True)
class TestOutcome:
    """Result of one program against one problem's tests."""

    passed: int
    total: int
    defined: bool
    error: str
    first_failure: str
    sandbox_status: str

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @classmethod
    def from_verdict(cls, verdict: Verdict) -> TestOutcome:
        error = verdict.error
        if not verdict.defined and not error:
            error = "the program exited before the tests ran"
        return cls(verdict.passed, verdict.total, verdict.defined, error, verdict.first_failure, verdict.status)


def function_tests(plan: TestPlan, entry_point: str, prompt: str) -> FunctionTests:
    """The judge's view of a problem: its prompt as support code, its preamble and its checks."""
    return FunctionTests(entry_point=entry_point, steps=plan.steps, preamble=plan.preamble, support=prompt)


def run_tests(
    programs: Sequence[str],
    suites: Sequence[FunctionTests],
    *,
    pool: SandboxPool,
    step_timeout_s: float = 3.0,
) -> list[TestOutcome]:
    """Judge every program against its tests in the sandbox pool (in parallel), in order."""
    verdicts = pool.judge_many(programs, suites, step_timeout_s=step_timeout_s)
    return [TestOutcome.from_verdict(v) for v in verdicts]


def default_limits(timeout_s: float) -> SandboxLimits:
    """Sandbox limits for HumanEval programs: small memory, a few processes, tiny files."""
    return SandboxLimits(timeout_s=timeout_s, memory_mb=512, max_processes=8, max_file_mb=4)
