"""Evaluation records: stored and read back whole (SQLite and PostgreSQL), capped transcripts, a team
analysis as rows sharing one id, removed with their run, refused for a run that does not exist."""

from __future__ import annotations

import pytest

from db.errors import NotFoundError
from db.evaluation_records import EvaluationInput
from db.evaluation_store import EvaluationStore
from db.store import Store
from db.text_cap import TEXT_CAP_BYTES

EPISODE = {"step": 4, "split": "eval", "sample_index": 0, "item_index": 1, "turns": [
    {"turn": 1, "agent_index": 0, "agent_name": "first", "prompt": "p", "completion": "abc", "reward": 0.5,
     "ret": 0.5, "advantage": 0.0}]}


def evaluation(run_id: int, **fields) -> EvaluationInput:
    values = dict(run_id=run_id, split="eval", settings={"seed": 1, "greedy": True, "samples": 1, "items": 2},
                  metrics={"eval/reward_mean": 0.5, "eval/pass@1": 0.25},
                  standard_errors={"eval/reward_mean": 0.1, "eval/pass@1": 0.25},
                  per_item=[{"index": 0, "correct": 0}, {"index": 1, "correct": 1}], episodes=[EPISODE],
                  checkpoint_step=4, checkpoint_path="/runs/run-1/checkpoints/checkpoint-4")
    values.update(fields)
    return EvaluationInput(**values)


def test_an_evaluation_is_stored_and_read_back_whole(store: Store, run_id: int) -> None:
    evaluations = EvaluationStore(store)
    stored = evaluations.add_evaluation(evaluation(run_id))
    again = evaluations.get_evaluation(stored.id)
    assert again == stored
    assert again.metrics == {"eval/reward_mean": 0.5, "eval/pass@1": 0.25} and again.checkpoint_step == 4
    assert again.per_item[1] == {"index": 1, "correct": 1} and again.episodes[0]["turns"][0]["completion"] == "abc"
    assert again.settings["greedy"] is True and again.kind == "eval" and again.created_at.tzinfo is not None
    second = evaluations.add_evaluation(evaluation(run_id, checkpoint_step=8))
    assert [e.id for e in evaluations.list_evaluations(run_id)] == [stored.id, second.id]


def test_a_team_analysis_is_one_row_per_variant_sharing_an_id(store: Store, run_id: int) -> None:
    evaluations = EvaluationStore(store)
    for label in ("trained", "base", "first reset"):
        evaluations.add_evaluation(evaluation(run_id, kind="team_analysis", label=label, analysis="a1"))
    rows = evaluations.list_evaluations(run_id)
    assert [(r.kind, r.label, r.analysis) for r in rows] == [("team_analysis", "trained", "a1"),
                                                             ("team_analysis", "base", "a1"),
                                                             ("team_analysis", "first reset", "a1")]
    with pytest.raises(ValueError, match="kind must be one of"):
        evaluations.add_evaluation(evaluation(run_id, kind="other"))


def test_long_completions_are_capped_in_stored_episodes(store: Store, run_id: int) -> None:
    long = {**EPISODE, "turns": [{**EPISODE["turns"][0], "completion": "x" * (TEXT_CAP_BYTES * 3)}]}
    stored = EvaluationStore(store).add_evaluation(evaluation(run_id, episodes=[long]))
    text = stored.episodes[0]["turns"][0]["completion"]
    assert len(text.encode()) <= TEXT_CAP_BYTES and "truncated by CoopLab" in text


def test_unknown_runs_are_refused_and_records_go_with_their_run(store: Store, run_id: int) -> None:
    evaluations = EvaluationStore(store)
    with pytest.raises(NotFoundError, match="no run with id 999999"):
        evaluations.add_evaluation(evaluation(999999))
    with pytest.raises(NotFoundError, match="no evaluation with id 424242"):
        evaluations.get_evaluation(424242)
    stored = evaluations.add_evaluation(evaluation(run_id))
    store.delete_run(run_id, force=True)
    with pytest.raises(NotFoundError):
        evaluations.get_evaluation(stored.id)
