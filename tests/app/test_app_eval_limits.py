"""The run page's Evaluate control queues within the operator's budget: an evaluation asking for more
samples per item than ``COOPLAB_MAX_SAMPLES_PER_NODE`` is refused on the page, naming the setting, and
nothing is stored."""

from __future__ import annotations

from db.eval_request_store import EvalRequestStore
from db.store import Store


def test_evaluate_refuses_an_evaluation_over_the_budget(app, store: Store, experiment: int, seed, home,
                                                        monkeypatch) -> None:
    monkeypatch.setenv("COOPLAB_MAX_SAMPLES_PER_NODE", "2")
    run_id = seed(experiment, status="succeeded", steps=1)
    store.add_checkpoint(run_id, 1, str(home / "runs" / f"run-{run_id}" / "checkpoints" / "checkpoint-1"))
    at = app("run_detail", run=run_id, tab="Evaluations")
    key = f"evaluate_{run_id}"
    at.number_input(key=f"{key}_samples").set_value(8)
    next(b for b in at.button if b.label == "Evaluate").click()
    at.run()
    assert not at.exception
    assert any("8 samples per item" in e.value and "COOPLAB_MAX_SAMPLES_PER_NODE" in e.value for e in at.error), [
        e.value for e in at.error]
    assert EvalRequestStore(store).list_for_run(run_id) == []
