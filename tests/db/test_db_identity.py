"""Experiment get-or-create under concurrency, the database's own id, and forgetting checkpoint rows."""

from __future__ import annotations

import threading
from pathlib import Path

from db.migrate import upgrade
from db.store import Store


def test_parallel_get_or_create_returns_one_experiment_to_everyone(store_url: str) -> None:
    stores = [Store(store_url) for _ in range(12)]  # an engine (connection pool) each, like separate processes
    barrier = threading.Barrier(len(stores))
    found: list[int] = []
    errors: list[BaseException] = []

    def create(store: Store) -> None:
        barrier.wait()
        try:
            found.append(store.get_or_create_experiment("fresh", description="d", tags=["t"]).id)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        assert errors == []
        assert len(found) == len(stores) and len(set(found)) == 1
        (only,) = stores[0].list_experiments()
        assert (only.name, only.description, only.tags) == ("fresh", "d", ("t",))
        # an existing experiment is returned as it is
        assert stores[0].get_or_create_experiment("fresh", description="other").description == "d"
    finally:
        for s in stores:
            s.close()


def test_the_database_id_is_stable_and_differs_between_databases(store: Store, tmp_path: Path) -> None:
    first = store.database_id()
    assert len(first) == 32 and store.database_id() == first
    with Store(store.url) as again:
        assert again.database_id() == first
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    upgrade(other_url)
    with Store(other_url) as other:
        assert other.database_id() != first


def test_checkpoint_rows_can_be_forgotten(store: Store) -> None:
    exp = store.create_experiment("ck")
    run = store.create_run(exp.id, {}, "cpu").id
    other = store.create_run(exp.id, {}, "cpu").id
    rows = [store.add_checkpoint(run, step, f"/x/checkpoint-{step}") for step in (1, 2, 3)]
    kept = store.add_checkpoint(other, 1, "/y/checkpoint-1")
    assert store.delete_checkpoints(run, [rows[0].id, rows[1].id, kept.id]) == 2  # another run's id is ignored
    assert [c.step for c in store.list_checkpoints(run)] == [3]
    assert store.list_checkpoints(other) == [kept]
    assert store.delete_checkpoints(run, []) == 0
