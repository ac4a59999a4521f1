"""The suite's CPU profile (tests/cpu_profile.py): files summed and ranked by CPU time."""

from __future__ import annotations

import pytest

from tests.cpu_profile import by_file, records_here


def test_files_are_summed_and_ranked_by_cpu_not_wall_time():
    lines = [{"test": "a.py::x", "file": "a.py", "cpu": 1.5, "wall": 9.0},
             {"test": "b.py::y", "file": "b.py", "cpu": 2.0, "wall": 2.0},
             {"test": "a.py::z", "file": "a.py", "cpu": 1.0, "wall": 1.0}]
    assert by_file(lines) == [("a.py", 2.5, 10.0, 2), ("b.py", 2.0, 2.0, 1)]


def test_only_the_profiled_pytest_and_its_own_workers_record(monkeypatch: pytest.MonkeyPatch):
    import os

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv("COOPLAB_TEST_CPU_PROFILE", "/tmp/profile.jsonl")
    monkeypatch.setenv("COOPLAB_TEST_CPU_PROFILE_OWNER", str(os.getpid()))
    assert records_here()
    monkeypatch.setenv("COOPLAB_TEST_CPU_PROFILE_OWNER", str(os.getppid()))
    assert not records_here()  # a pytest started by a test of the profiled one
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert records_here()  # an xdist process of the profiled pytest
    monkeypatch.delenv("COOPLAB_TEST_CPU_PROFILE")
    assert not records_here()
