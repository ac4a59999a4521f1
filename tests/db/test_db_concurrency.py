"""Several processes on one database: a writer with concurrent readers (SQLite WAL), and racing
state changes where exactly one process may win."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

from db.states import InvalidTransition
from db.store import Store

KEYS = [f"train/k{i}" for i in range(10)]
STEPS = 60


def _write_steps(url: str, run_id: int) -> None:
    with Store(url) as store:
        for step in range(STEPS):
            store.log_step(run_id, step, step * 4, {k: float(step) for k in KEYS})


def test_writer_process_and_readers_see_whole_steps(store_url: str, tmp_path: Path) -> None:
    store = Store(store_url)
    run_id = store.create_run(store.create_experiment("conc").id, {}, "cpu").id
    writer = mp.get_context("fork").Process(target=_write_steps, args=(store_url, run_id))
    writer.start()
    reads, last_step = 0, -1
    try:
        while writer.is_alive() or reads == 0:
            latest = store.latest_metrics(run_id, KEYS)  # one read transaction
            if latest:
                steps = {p.step for p in latest.values()}
                # All keys of a step arrive together, so a reader never sees half a step.
                assert len(latest) == len(KEYS) and len(steps) == 1, latest
                step = steps.pop()
                assert step >= last_step  # progress never goes backwards
                last_step = step
            reads += 1
            time.sleep(0.005)
    finally:
        writer.join(timeout=60)
    assert writer.exitcode == 0
    assert reads > 1
    assert store.series(run_id, KEYS[0]).total_points == STEPS
    assert store.get_run(run_id).step == STEPS - 1
    store.close()


def _claim(url: str, run_id: int, worker: str, barrier: object, results: object) -> None:
    with Store(url) as store:
        barrier.wait()  # type: ignore[attr-defined]
        try:
            store.transition(run_id, "starting", expected_from="queued", worker=worker)
            results.put(worker)  # type: ignore[attr-defined]
        except InvalidTransition as err:
            results.put(f"refused:{err.current}")  # type: ignore[attr-defined]


def test_racing_workers_claim_a_run_once(store_url: str) -> None:
    store = Store(store_url)
    run_id = store.create_run(store.create_experiment("race").id, {}, "cpu").id
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(store_url, run_id, f"w{i}", barrier, results)) for i in range(4)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    winners = [o for o in outcomes if not o.startswith("refused")]
    assert len(winners) == 1, outcomes
    assert sorted(o for o in outcomes if o.startswith("refused")) == ["refused:starting"] * 3
    run = store.get_run(run_id)
    assert (run.status, run.worker) == ("starting", winners[0])
    store.close()
