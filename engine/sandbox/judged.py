"""Judging a candidate function where it cannot reach the verdict.

Two sandboxed processes per program: the *candidate* (``guest/serve.py``) defines the model-written
program and answers calls of its function; the *judge* (``guest/judge.py``) holds the trusted test
code and calls the candidate through pipes. Only plain values of exact built-in types cross
(``guest/plain.py``), so an object whose ``==`` always answers True never reaches an assertion.
The verdict travels on a file descriptor that only the judge holds, is read here from the last
complete line, and is trusted only as far as the caller's own plan allows: the number of tests
comes from :class:`FunctionTests`, ``passed`` is clamped to ``[0, total]``, and a missing or
malformed verdict is a failure with a reason, never an exception.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass

from engine.permissions.invisible_text import strip_invisible
from engine.sandbox.limits import SandboxLimits
from engine.sandbox.process import Guest

MAX_MESSAGE_BYTES = 1 << 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def clean_text(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters: control characters and line breaks become
    spaces, and every invisible character (format, direction, private-use and unassigned code points,
    the tag block, variation selectors, fillers: :func:`engine.permissions.invisible_text.strip_invisible`) goes."""
    flat = " ".join(strip_invisible(_CONTROL.sub(" ", str(text))).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass(frozen=True)
class FunctionTests:
    """Trusted tests of one function: ``support`` code (helpers the tests use, e.g. the problem's
    own functions), a ``preamble``, then ``steps`` of kind ``setup`` or ``test`` run in order with
    ``candidate`` bound to the function under test."""

    entry_point: str
    steps: tuple[tuple[str, str], ...]
    preamble: str = ""
    support: str = ""

    @property
    def num_tests(self) -> int:
        return sum(kind == "test" for kind, _ in self.steps)


@dataclass(frozen=True)
class Verdict:
    """How a program did against its tests: counts from the caller's plan, reasons cleaned."""

    passed: int
    total: int
    defined: bool
    error: str
    first_failure: str
    status: str  # ok, timeout (the wall clock cut the tests short) or failed (no usable verdict)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0


def parse_verdict(text: str, total: int, *, timed_out: bool, timeout_s: float) -> Verdict:
    """The verdict in the judge's tally lines (pure function); the last complete, well-formed one counts."""
    tally = None
    for line in reversed(text.splitlines()):
        try:
            candidate = json.loads(line)
        except ValueError:
            continue  # a line cut short when the judge was killed
        if isinstance(candidate, dict) and type(candidate.get("passed")) is int:
            tally = candidate
            break
    cut_off = f"the tests were cut off by the wall-clock limit of {timeout_s:g}s" if timed_out else ""
    if tally is None:
        reason = cut_off or "the judge reported no verdict"
        return Verdict(0, total, False, reason, "", "timeout" if timed_out else "failed")
    error = clean_text(tally.get("error", ""))
    return Verdict(
        passed=min(max(tally["passed"], 0), total),
        total=total,
        defined=tally.get("defined") is True,
        error="; ".join(part for part in (error, cut_off) if part),
        first_failure=clean_text(tally.get("first_failure", "")),
        status="timeout" if timed_out else "ok",
    )


def run_function_tests(
    program: str,
    tests: FunctionTests,
    *,
    limits: SandboxLimits | None = None,
    step_timeout_s: float = 3.0,
) -> Verdict:
    """Run ``tests`` against the function ``tests.entry_point`` that ``program`` defines.

    Both processes get ``limits``; the judge's wall clock (``limits.timeout_s``) bounds the whole
    run, each step (tests and calls together) gets ``step_timeout_s``.
    """
    limits = limits or SandboxLimits()
    spec = json.dumps({"entry_point": tests.entry_point, "steps": [list(s) for s in tests.steps],
                       "preamble": tests.preamble, "support": tests.support, "step_timeout": step_timeout_s})
    common = {"max_message_bytes": MAX_MESSAGE_BYTES}
    fds: list[int] = []
    try:
        with Guest("serve", {"main.py": program}, limits) as candidate, \
                Guest("judge", {"tests.json": spec}, limits) as judge:
            requests_r, requests_w = os.pipe()
            answers_r, answers_w = os.pipe()
            verdict_path = judge.private / "verdict"
            verdict_fd = os.open(verdict_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            fds += [requests_r, requests_w, answers_r, answers_w, verdict_fd]
            candidate.start(extra={**common, "requests_fd": requests_r, "answers_fd": answers_w,
                                   "entry_point": tests.entry_point, "define_timeout": step_timeout_s},
                            pass_fds=(requests_r, answers_w))
            judge.start(extra={**common, "requests_fd": requests_w, "answers_fd": answers_r,
                               "verdict_fd": verdict_fd}, pass_fds=(requests_w, answers_r, verdict_fd))
            _close(fds)
            timed_out = judge.wait(limits.timeout_s)
            candidate.kill()
            with open(verdict_path, "rb") as fh:
                text = fh.read(MAX_MESSAGE_BYTES).decode("utf-8", "replace")
    finally:
        _close(fds)
    return parse_verdict(text, tests.num_tests, timed_out=timed_out, timeout_s=limits.timeout_s)


def _close(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())
