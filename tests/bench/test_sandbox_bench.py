"""The sandbox benchmark measures all three ways of starting a program, and its clock counts right."""

from __future__ import annotations

import re

import pytest

from bench.sandbox import main
from bench.timing import median_seconds


def test_median_seconds_times_every_round_after_an_optional_warm_up() -> None:
    calls: list[int] = []
    assert median_seconds(lambda: calls.append(1), 3) >= 0 and len(calls) == 3
    calls.clear()
    median_seconds(lambda: calls.append(1), 3, warm_up=True)
    assert len(calls) == 4


def test_per_program_overhead_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--rounds", "1", "--skip-humaneval"])
    line = capsys.readouterr().out.strip()
    times = re.findall(r"(bare start|unisolated|bubblewrap)\s+([\d.]+) ms", line)
    assert [name for name, _ in times] == ["bare start", "unisolated", "bubblewrap"], line
    assert all(float(ms) > 0 for _, ms in times) and "boundary adds" in line
