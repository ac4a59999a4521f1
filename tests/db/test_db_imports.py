"""db/ stays light: importing the whole package pulls in no torch, Celery, Streamlit or engine code but the
turn records it stores (``engine.transcripts``, plain dataclasses; ``engine/__init__`` loads its names lazily)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_db_imports_nothing_heavy() -> None:
    code = ("import sys, db.store, db.migrate, db.downsample; "
            "bad = sorted(m for m in ('torch', 'transformers', 'celery', 'streamlit', 'jobs', 'app') "
            "if m in sys.modules); "
            "bad += sorted(m for m in sys.modules if m.split('.')[0] == 'engine' "
            "and m not in ('engine', 'engine.lazy', 'engine.transcripts')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
