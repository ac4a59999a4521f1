"""The benchmarks stay outside the layers they time, and the store's and dashboard's load no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_storage_and_dashboard_benchmarks_import_no_torch() -> None:
    code = ("import sys, bench, bench.timing, bench.storage, bench.dashboard; "
            "print(sorted(m for m in ('torch', 'transformers', 'celery') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_no_benchmark_is_left_inside_another_package() -> None:
    packages = ("engine", "db", "jobs", "app", "cooplab")
    strays = sorted(str(p.relative_to(ROOT)) for package in packages for p in (ROOT / package).rglob("*.py")
                    if "bench" in str(p.relative_to(ROOT / package)))
    assert strays == ["cooplab/cmd_bench.py"], strays
