"""Cost of the sandbox's OS boundary: per-program overhead and the 164-problem HumanEval check.

    python -m bench.sandbox [--rounds 30] [--workers 2] [--skip-humaneval]

Side by side in one run: a bare interpreter start (no sandbox), the UNSAFE unisolated mode (limits
and the audit hook only) and bubblewrap. The boundary's overhead is bubblewrap minus unisolated.
Then the canonical solutions of all 164 HumanEval problems and one universal-object attack are
judged with ``--workers`` programs at a time, under both modes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import subprocess
import time
from collections.abc import Iterator

from bench.timing import median_seconds
from engine.sandbox import FunctionTests, SandboxLimits, SandboxPool, run_function_tests, run_python
from engine.sandbox import boundary as boundary_module

LIMITS = SandboxLimits(timeout_s=20, memory_mb=512, max_processes=8, max_file_mb=4)
UNSAFE_LIMITS = dataclasses.replace(LIMITS, unisolated_allowed=True)  # the operator's UNSAFE permission


@contextlib.contextmanager
def unisolated() -> Iterator[None]:
    """Measure the UNSAFE mode (with :data:`UNSAFE_LIMITS`) even where bubblewrap works."""
    real = boundary_module._discover
    boundary_module._discover = lambda: "measuring the unisolated mode"
    try:
        yield
    finally:
        boundary_module._discover = real


def humaneval_suites() -> tuple[list[dict], list[FunctionTests]]:
    from engine.tasks.humaneval.execution import function_tests
    from engine.tasks.humaneval.problems import load_problems, split_tests

    problems = list(load_problems())
    suites = [function_tests(split_tests(p["test"]), p["entry_point"], p["prompt"]) for p in problems]
    return problems, suites


def check_all(programs: list[str], suites: list[FunctionTests], workers: int,
              limits: SandboxLimits = LIMITS) -> tuple[float, int, int]:
    with SandboxPool(workers, limits=limits) as pool:
        started = time.perf_counter()
        verdicts = pool.judge_many(programs, suites)
        elapsed = time.perf_counter() - started
    return elapsed, sum(v.passed for v in verdicts), sum(v.total for v in verdicts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-humaneval", action="store_true")
    args = parser.parse_args(argv)

    interpreter = boundary_module.boundary().interpreter
    bare = median_seconds(lambda: subprocess.run([interpreter, "-I", "-S", "-B", "-c", "print(1)"], check=True,
                                           capture_output=True), args.rounds, warm_up=True)
    isolated = median_seconds(lambda: run_python("print(1)", limits=LIMITS), args.rounds, warm_up=True)
    with unisolated():
        plain = median_seconds(lambda: run_python("print(1)", limits=UNSAFE_LIMITS), args.rounds, warm_up=True)
    print(f"per program (median of {args.rounds})   bare start {bare * 1e3:6.1f} ms   unisolated "
          f"{plain * 1e3:6.1f} ms   bubblewrap {isolated * 1e3:6.1f} ms   boundary adds "
          f"{(isolated - plain) * 1e3:+.1f} ms")
    if args.skip_humaneval:
        return
    problems, suites = humaneval_suites()
    first = problems[0]["prompt"] + problems[0]["canonical_solution"]
    judged = median_seconds(lambda: run_function_tests(first, suites[0], limits=LIMITS), args.rounds, warm_up=True)
    with unisolated():
        judged_plain = median_seconds(lambda: run_function_tests(first, suites[0], limits=UNSAFE_LIMITS), args.rounds,
                                      warm_up=True)
    print(f"one judged program (HumanEval/0)   unisolated {judged_plain * 1e3:6.1f} ms   bubblewrap "
          f"{judged * 1e3:6.1f} ms   boundary adds {(judged - judged_plain) * 1e3:+.1f} ms")
    canonical = [p["prompt"] + p["canonical_solution"] for p in problems]
    universal = [f"class U:\n    def __eq__(self, o): return True\ndef {p['entry_point']}(*a, **k):\n    return U()\n"
                 for p in problems]
    for label, programs in (("canonical", canonical), ("universal object", universal)):
        seconds, passed, total = check_all(programs, suites, args.workers)
        with unisolated():
            seconds_plain, passed_plain, _ = check_all(programs, suites, args.workers, UNSAFE_LIMITS)
        print(f"164 problems, {label:16s} {args.workers} workers   unisolated {seconds_plain:5.1f} s "
              f"({passed_plain}/{total} checks)   bubblewrap {seconds:5.1f} s ({passed}/{total} checks)")


if __name__ == "__main__":
    main()
