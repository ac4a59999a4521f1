"""Test-time baselines on the run page: the Evaluate form offers only those the run's team and task can
play (and says why not the others) and queues the chosen ones with the evaluation; the held-out table
shows each baseline beside the team (mean ± s.e.), and its CSV download carries them as numbers."""

from __future__ import annotations

import csv
import io

from db.evaluation_records import EvaluationInput
from db.evaluation_store import EvaluationStore
from db.store import Store


def _evaluation(run_id: int, reward: float, se: float, *, step: int | None = 2, kind: str = "eval",
                label: str = "") -> EvaluationInput:
    settings = {"seed": 3, "greedy": True, "samples": 1, "items": 2, **({"baseline": label} if label else {})}
    return EvaluationInput(run_id=run_id, split="eval", settings=settings,
                           metrics={"eval/reward_mean": reward, "eval/reward/letters": reward / 2},
                           standard_errors={"eval/reward_mean": se, "eval/reward/letters": se / 2},
                           per_item=[{"eval/reward_mean": reward}] * 2, checkpoint_step=step, kind=kind, label=label)


def test_the_form_offers_the_baselines_the_team_can_play_and_queues_the_chosen(
        app, store: Store, experiment: int, seed, home) -> None:
    from db.eval_request_store import EvalRequestStore

    run_id = seed(experiment, status="succeeded", steps=2)  # two agents on the quick start (no one-agent form)
    store.add_checkpoint(run_id, 2, str(home / "runs" / f"run-{run_id}" / "checkpoints" / "checkpoint-2"))
    at = app("run_detail", run=run_id, tab="Evaluations")  # the tab opened by its link
    assert not at.exception
    key = f"evaluate_{run_id}"
    picker = at.multiselect(key=f"{key}_baselines")
    assert picker.options == ["parallel (naive concatenation)", "pipeline (sequential pipeline)",
                              "discussion (one round of discussion)"]
    assert any("Not offered for this run: single (one agent alone): task 'quickstart' has no one-agent form "
               "(its team sizes are 2)" in c.value for c in at.caption)
    at.checkbox(key=f"{key}_greedy").check()
    picker.set_value(["parallel", "discussion"])
    next(b for b in at.button if b.label == "Evaluate").click()
    at.run()
    assert not at.exception
    (request,) = EvalRequestStore(store).list_for_run(run_id)
    assert request.options["baselines"] == ["parallel", "discussion"] and request.options["greedy"] is True
    assert any(f"Queued evaluation request #{request.id} (checkpoint last) on cpu with baselines parallel, "
               "discussion" in s.value for s in at.success)
    assert list(at.dataframe[0].value["options"]) == ["greedy · all items · baselines: parallel, discussion"]


def test_the_held_out_table_shows_the_baselines_beside_the_team(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=2)
    evaluations = EvaluationStore(store)
    evaluations.add_evaluations([_evaluation(run_id, 0.75, 0.05),
                                 _evaluation(run_id, 0.5, 0.1, step=None, kind="baseline", label="pipeline"),
                                 _evaluation(run_id, 0.25, 0.2, step=None, kind="baseline", label="parallel")])
    at = app("run_detail", run=run_id, tab="Evaluations")  # the tab opened by its link
    assert not at.exception
    held_out = at.dataframe[0].value
    assert list(held_out["evaluated"]) == ["team", "baseline: parallel (naive concatenation)",
                                           "baseline: pipeline (sequential pipeline)"]
    assert list(held_out["checkpoint"]) == ["2", "base models", "base models"]
    assert list(held_out["eval/reward_mean"]) == ["0.7500 ± 0.0500", "0.2500 ± 0.2000", "0.5000 ± 0.1000"]
    assert any("A baseline row is the run's base models" in c.value for c in at.caption)
    assert any(b.label == "held-out evaluations CSV" for b in at.get("download_button"))


def test_the_csv_carries_means_and_standard_errors_as_numbers(store: Store, experiment: int, seed) -> None:
    from app.components.evaluations import evaluations_csv

    run_id = seed(experiment, status="succeeded", steps=1)
    stored = EvaluationStore(store).add_evaluations([
        _evaluation(run_id, 0.25, 0.2, step=None, kind="baseline", label="discussion"),
        _evaluation(run_id, 0.75, 0.05)])
    rows = list(csv.DictReader(io.StringIO(evaluations_csv(stored))))
    assert [(r["evaluated"], r["baseline"], r["checkpoint_step"]) for r in rows] == [("team", "", "2"),
                                                                                   ("baseline", "discussion", "")]
    assert [(r["eval/reward_mean"], r["eval/reward_mean s.e."]) for r in rows] == [("0.75", "0.05"), ("0.25", "0.2")]
    assert rows[0]["eval/reward/letters"] == "0.375" and rows[1]["seed"] == "3"


def test_what_the_form_offers_for_each_task_by_hand() -> None:
    from app.components.evaluate_control import baseline_offer
    from engine.schema.task_registry import task_catalog

    catalog = {info.name: info for info in task_catalog(include_plugins=False)}

    def config(task: str, agents: int = 2) -> dict:
        return {"task": {"name": task}, "agents": [{"name": f"a{i}"} for i in range(agents)]}

    assert baseline_offer(config("tldr"), catalog) == (["single", "parallel", "pipeline", "discussion"], {})
    offered, unavailable = baseline_offer(config("humaneval", agents=1), catalog)
    assert offered == ["single"] and set(unavailable) == {"parallel", "pipeline", "discussion"}
    assert unavailable["pipeline"] == "a protocol between agents needs a team of two or more; this run has 1 agent"
    assert baseline_offer(config("writing"), catalog)[0] == ["parallel", "pipeline", "discussion"]
