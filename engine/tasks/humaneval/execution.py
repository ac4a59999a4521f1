"""Running a joint program against a problem's tests, only ever inside the sandbox.

The sandboxed harness defines the program, then runs the test plan step by step with a per-step
alarm, and after every step prints a result line tagged with a random marker chosen by the caller;
the last line counts. A program cut off by the wall clock keeps the checks it passed before; one
that produces no result line at all (it hung while being defined, crashed or exited) scores zero.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from engine.sandbox import SandboxLimits, SandboxPool, SandboxResult
from engine.tasks.humaneval.problems import TestPlan

_HARNESS = r'''
import json as _json
import signal as _signal

_SPEC = _json.loads({spec!r})


def _on_alarm(signum, frame):
    raise TimeoutError("test step timed out")


_signal.signal(_signal.SIGALRM, _on_alarm)
_result = {{"defined": False, "passed": 0, "first_failure": "", "error": ""}}
_result["total"] = sum(1 for _kind, _ in _SPEC["steps"] if _kind == "test")


def _report():
    # after every step, so a run cut off by the wall clock keeps the credit it earned
    print({marker!r} + _json.dumps(_result), flush=True)


_ns = {{"__name__": "__candidate__"}}
try:
    _signal.setitimer(_signal.ITIMER_REAL, _SPEC["step_timeout"])
    exec(compile(_SPEC["program"], "solution.py", "exec"), _ns)
    _signal.setitimer(_signal.ITIMER_REAL, 0)
    _result["defined"] = _SPEC["entry_point"] in _ns
    if not _result["defined"]:
        _result["error"] = "the program does not define " + _SPEC["entry_point"]
except BaseException as _exc:
    _signal.setitimer(_signal.ITIMER_REAL, 0)
    _result["error"] = type(_exc).__name__ + ": " + str(_exc)[:300]
_report()
if _result["defined"]:
    try:
        exec(_SPEC["preamble"], _ns)
    except BaseException as _exc:
        _result["error"] = "test preamble failed: " + type(_exc).__name__
    _ns["candidate"] = _ns[_SPEC["entry_point"]]
    for _kind, _source in _SPEC["steps"]:
        try:
            _signal.setitimer(_signal.ITIMER_REAL, _SPEC["step_timeout"])
            exec(_source, _ns)
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            if _kind == "test":
                _result["passed"] += 1
        except BaseException as _exc:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            if not _result["first_failure"]:
                _result["first_failure"] = (_source.splitlines() or [""])[0][:200] + "  ->  " + (
                    type(_exc).__name__ + (": " + str(_exc)[:200] if str(_exc) else ""))
            if _kind == "setup":
                break  # later checks depend on the setup
        _report()
_report()
'''


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


def harness_source(program: str, plan: TestPlan, entry_point: str, *, marker: str, step_timeout_s: float) -> str:
    """The sandboxed program that runs ``program`` against ``plan`` and prints a marked JSON line."""
    spec = json.dumps(
        {
            "program": program,
            "preamble": plan.preamble,
            "steps": [list(step) for step in plan.steps],
            "entry_point": entry_point,
            "step_timeout": step_timeout_s,
        }
    )
    return _HARNESS.format(spec=spec, marker=marker)


def parse_outcome(result: SandboxResult, marker: str, total: int) -> TestOutcome:
    """Read the harness's last marked line; no line means nothing passed (timeout, crash, exit)."""
    lines = [line for line in result.stdout.splitlines() if line.startswith(marker)]
    cut_off = "" if result.ok else result.reason
    if not lines:
        return TestOutcome(0, total, False, cut_off or "the program exited before the tests ran", "", result.status)
    try:
        data = json.loads(lines[-1][len(marker):])
    except ValueError:  # a line cut in half by the kill
        data = json.loads(lines[-2][len(marker):]) if len(lines) > 1 else {}
    error = str(data.get("error", ""))
    return TestOutcome(
        passed=int(data.get("passed", 0)),
        total=int(data.get("total", 0)) or total,
        defined=bool(data.get("defined", False)),
        error=f"{error}; {cut_off}" if error and cut_off else (error or cut_off),
        first_failure=str(data.get("first_failure", "")),
        sandbox_status=result.status,
    )


def run_tests(
    programs: Sequence[str],
    plans: Sequence[TestPlan],
    entry_points: Sequence[str],
    *,
    pool: SandboxPool,
    step_timeout_s: float = 3.0,
) -> list[TestOutcome]:
    """Run every program against its plan in the sandbox pool (in parallel), in order."""
    marker = f"@@RESULT-{secrets.token_hex(8)}@@"
    sources = [
        harness_source(program, plan, entry, marker=marker, step_timeout_s=step_timeout_s)
        for program, plan, entry in zip(programs, plans, entry_points, strict=True)
    ]
    results = pool.run_many(sources)
    return [parse_outcome(r, marker, plan.num_tests) for r, plan in zip(results, plans, strict=True)]


def default_limits(timeout_s: float) -> SandboxLimits:
    """Sandbox limits for HumanEval programs: small memory, a few processes, tiny files."""
    return SandboxLimits(timeout_s=timeout_s, memory_mb=512, max_processes=8, max_file_mb=4)
