"""A fresh store on a private SQLite file for the benchmarks' tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from db.store import Store


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          migrated_sqlite: Callable[[Path], str]) -> Iterator[Store]:
    """A migrated store on ``tmp_path`` (a copy of the suite's migrated template); COOPLAB_HOME points there
    so nothing touches the real home."""
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COOPLAB_DATABASE_URL", raising=False)
    st = Store(migrated_sqlite(tmp_path / "bench.db"))
    yield st
    st.close()
