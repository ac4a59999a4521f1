"""The pool runs programs in parallel, never more than its size at once, results in order."""

from __future__ import annotations

import time

from engine.sandbox import SandboxLimits, SandboxPool

SLEEPER = "import time\ntime.sleep(0.8)\nprint({index})"


def test_pool_is_parallel_bounded_and_ordered():
    programs = [SLEEPER.format(index=i) for i in range(4)]
    with SandboxPool(2, limits=SandboxLimits(timeout_s=5, memory_mb=256)) as pool:
        started = time.monotonic()
        results = pool.run_many(programs)
        elapsed = time.monotonic() - started
    assert [r.stdout.strip() for r in results] == ["0", "1", "2", "3"]
    assert all(r.ok for r in results)
    # two at a time: at least two rounds of 0.8 s, well under four sequential rounds
    assert 1.6 <= elapsed < 3.2 + 1.5


def test_one_failing_program_does_not_affect_the_others():
    with SandboxPool(2, limits=SandboxLimits(timeout_s=1.5, memory_mb=256)) as pool:
        results = pool.run_many(["print('a')", "while True: pass", "raise ValueError('boom')", "print('d')"])
    assert [r.status for r in results] == ["ok", "timeout", "error", "ok"]
    assert results[0].stdout.strip() == "a" and results[3].stdout.strip() == "d"
    assert "ValueError: boom" in results[2].reason
