"""A submit's writes without the ORM (``db.run_writes.RunWrites`` on an engine alone, what ``cooplab
submit`` uses) write what the store writes, return what is stored, refuse what the store refuses, and
import no ``sqlalchemy.orm``; the ORM classes of the two tables are mapped onto the same Core tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from db.errors import NotFoundError
from db.models import Base, ExperimentRow, RunRow
from db.run_writes import RunWrites
from db.store import Store
from db.tables import experiments, metadata, runs

ROOT = Path(__file__).resolve().parents[2]


def _row(store: Store, table, row_id: int) -> dict:  # type: ignore[no-untyped-def]
    with store.engine.connect() as conn:
        found = conn.execute(select(table).where(table.c.id == row_id)).mappings().one()
    return {k: v for k, v in found.items() if k not in ("id", "created_at", "updated_at")}


def test_the_orm_classes_are_mapped_onto_the_core_tables() -> None:
    assert Base.metadata is metadata
    assert ExperimentRow.__table__ is experiments and RunRow.__table__ is runs


def test_core_writes_store_and_return_what_the_store_does(store: Store) -> None:
    writes = RunWrites(store.engine)
    config = {"name": "x", "trainer": {"max_steps": 5}, "nested": [1, {"a": None}]}
    by_core = writes.get_or_create_experiment("core", description="d", tags=["a", " a", "b"], config=config)
    by_store = store.get_or_create_experiment("orm", description="d", tags=["a", " a", "b"], config=config)
    assert by_core == store.get_experiment(by_core.id) and by_store == store.get_experiment(by_store.id)
    assert _row(store, experiments, by_core.id) == {**_row(store, experiments, by_store.id), "name": "core"}
    assert writes.get_or_create_experiment(" core ", description="other") == by_core  # the existing one, as is

    core_run = writes.create_run(by_core.id, config, " cuda:0 ", total_steps=5, tags=("t",), notes="n")
    store_run = store.create_run(by_core.id, config, " cuda:0 ", total_steps=5, tags=("t",), notes="n")
    assert core_run == store.get_run(core_run.id) and core_run.queue == "cuda:0" and core_run.attempt == 1
    assert _row(store, runs, core_run.id) == _row(store, runs, store_run.id)
    again = writes.create_run(by_core.id, {}, "cpu", resumed_from=core_run.id)
    assert again.attempt == 2 and again == store.get_run(again.id)

    updated = writes.update_run(core_run.id, celery_task_id="task-1", total_steps=7)
    assert updated == store.get_run(core_run.id) and (updated.celery_task_id, updated.total_steps) == ("task-1", 7)
    assert writes.update_run(core_run.id, celery_task_id="task-1") == updated  # nothing changes


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda w, e, r: w.get_or_create_experiment("  "), ValueError, "non-empty name"),
    (lambda w, e, r: w.get_or_create_experiment("x" * 201), ValueError, "201 characters"),
    (lambda w, e, r: w.create_run(e + 1000, {}, "cpu"), NotFoundError, "no experiment with id"),
    (lambda w, e, r: w.create_run(e, {}, " "), ValueError, "needs a queue name"),
    (lambda w, e, r: w.create_run(e, {}, "cpu", total_steps=-1), ValueError, "total_steps must be >= 0"),
    (lambda w, e, r: w.create_run(e, {}, "cpu", resumed_from=r + 1000), NotFoundError, "no run with id"),
    (lambda w, e, r: w.create_run(e, [1], "cpu"), TypeError, "config must be a mapping"),
    (lambda w, e, r: w.update_run(r + 1000, worker="w"), NotFoundError, "no run with id"),
    (lambda w, e, r: w.update_run(r, total_steps=-2), ValueError, "total_steps must be >= 0"),
])
def test_core_writes_refuse_what_the_store_refuses(store: Store, experiment_id: int, run_id: int, call, error,
                                                    message) -> None:  # type: ignore[no-untyped-def]
    before = (store.list_experiments(), store.list_runs())
    for writer in (RunWrites(store.engine), store):
        with pytest.raises(error, match=message):
            call(writer, experiment_id, run_id)
    assert (store.list_experiments(), store.list_runs()) == before


def test_core_writes_import_no_orm() -> None:
    code = ("import sys; from db.run_writes import RunWrites; "
            "print(sorted(m for m in ('sqlalchemy.orm', 'db.models', 'db.store') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
