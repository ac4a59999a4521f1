"""The dashboard shows heartbeat ages and run durations on the database server's clock: heartbeats,
worker sightings and run starts are stamped with it (:mod:`db.clock`), so a dashboard whose machine's
clock is off (here: the wall clock this process's dashboard code reads, shifted; the system clock, and
so SQLite's, stay as they are) still shows their true age."""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta

import pytest

import db.models
from app.queries import experiment_names, runs_rows
from app.run_table import Columns
from db.store import Store

SHIFT_S = 300.0  # the dashboard's machine reads 5 minutes ahead of the database server


def _shifted_datetime(shift_s: float) -> type[datetime]:
    class ShiftedDatetime(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
            return datetime.now(tz) + timedelta(seconds=shift_s)

    return ShiftedDatetime


@pytest.fixture
def dashboard_clock_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every clock the dashboard's code reads in this process (``datetime.now`` in the ``app`` modules,
    :func:`db.models.utcnow`) reads :data:`SHIFT_S` seconds ahead."""
    shifted = _shifted_datetime(SHIFT_S)
    for name, module in list(sys.modules.items()):
        if (name == "app" or name.startswith("app.")) and getattr(module, "datetime", None) is datetime:
            monkeypatch.setattr(module, "datetime", shifted)
    true_utcnow = db.models.utcnow
    monkeypatch.setattr(db.models, "utcnow", lambda: true_utcnow() + timedelta(seconds=SHIFT_S))


def _seconds(shown: str) -> float:
    """``42s`` / ``3m 05s`` / ``1h 02m`` (optionally followed by `` ago``) in seconds."""
    match = re.fullmatch(r"(?:(-?\d+)h )?(?:(-?\d+)m ?)?(?:(-?\d+)s)?(?: ago)?", shown.strip())
    assert match, shown
    hours, minutes, secs = (int(g) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + secs


def test_a_fresh_heartbeat_shows_as_fresh_on_a_dashboard_5_min_ahead(app, store: Store, experiment: int, seed,
                                                                     dashboard_clock_ahead) -> None:
    """Before: the run header showed ``5m 00s ago`` for a heartbeat written a moment ago."""
    run_id = seed(experiment, status="running", steps=1)
    store.heartbeat(run_id, live_only=True)
    at = app("run_detail", run=run_id)
    assert not at.exception
    [shown] = [m.value for m in at.metric if m.label == "heartbeat"]
    assert _seconds(shown) < 30, shown


def test_a_worker_just_seen_shows_as_just_seen_on_a_dashboard_5_min_ahead(app, store: Store,
                                                                          dashboard_clock_ahead) -> None:
    """Before: the Workers page said the worker's last heartbeat was ``5m 00s ago``."""
    store.upsert_worker("w@here", host="here", queues=["cpu"])
    at = app("workers")
    assert not at.exception
    table = at.dataframe[0].value
    [shown] = list(table["last heartbeat"])
    assert _seconds(shown) < 30, shown


def test_an_active_run_s_duration_is_on_the_server_clock(store: Store, experiment: int, seed,
                                                        dashboard_clock_ahead) -> None:
    """Before: a run started a moment ago had trained ``5m 00s`` by the Runs table."""
    run_id = seed(experiment, status="running", steps=1)
    [row] = runs_rows(store, experiment_names(store), Columns())
    assert row.run_id == run_id and _seconds(row.cells["duration"]) < 30, row.cells["duration"]
