"""Writing heuristics by hand, the shipped prompt set, and a user dataset with a text column."""

from __future__ import annotations

import json

import pytest

from engine.tasks import TaskError, build_task
from engine.tasks.text_metrics import (
    diversity_score,
    jaccard,
    length_ratio_score,
    overlap_score,
    ramp,
    relevance_score,
    word_range_score,
    words,
)


def test_ramp_by_hand():
    assert ramp(2.0, 1.0, 1.6, 3.2, 5.0) == 1.0
    assert ramp(1.3, 1.0, 1.6, 3.2, 5.0) == pytest.approx(0.5)
    assert ramp(4.1, 1.0, 1.6, 3.2, 5.0) == pytest.approx(0.5)
    assert ramp(0.5, 1.0, 1.6, 3.2, 5.0) == 0.0 and ramp(6.0, 1.0, 1.6, 3.2, 5.0) == 0.0


def test_text_metrics_by_hand():
    assert words("It's 2 cats!") == ["it's", "2", "cats"]
    assert length_ratio_score("abcde", "x" * 10) == 1.0  # ratio 2.0
    assert length_ratio_score("abcde", "x" * 5) == 0.0  # ratio 1.0
    assert length_ratio_score("", "text") == 0.0
    assert word_range_score("one two three", 2, 4) == 1.0
    assert word_range_score("one two three", 4, 8) == pytest.approx(0.5)  # 3 is halfway from 2 to 4
    assert diversity_score("a a a b") == pytest.approx((2 / 4) / 0.6)
    assert diversity_score("") == 0.0
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    # content words: {bees, make, honey} vs {bees, build, combs}: jaccard 1/5 -> 0.2 / 0.2 target = 1
    assert overlap_score("Bees make honey", "Bees build combs") == 1.0
    assert relevance_score("bees dance wildly", "The bees dance to share food") == pytest.approx(2 / 3)


def test_shipped_set_and_reward_terms():
    task = build_task("writing", {}, 2)
    assert task.roles == ["summary", "elaboration"]
    assert len(task.train_dataset) == 16 and len(task.eval_dataset) == 4
    item = task.train_dataset[0]
    assert "Text: " + item["prompt"] in task.formatters[0](item)
    summary = "Honey bees live in colonies and workers dance to show where flowers are."
    elaboration = (
        "A honey bee colony has thousands of workers, one queen and some drones. Workers gather nectar and "
        "pollen, build wax combs and raise the young. A forager that finds flowers returns and dances so that "
        "other workers learn the direction and distance of the food."
    )
    totals, terms = task.reward_func.score([[summary, summary], [elaboration, summary]], [item, item], None)
    assert set(terms) == {"length_ratio", "length_range", "diversity", "coherence", "relevance"}
    assert terms["length_ratio"][0] > 0.5 and terms["length_ratio"][1] == 0.0  # equal lengths: ratio 1
    assert terms["relevance"][0] > 0.5
    assert totals[0] > totals[1]


def test_user_dataset_with_a_text_column(tmp_path):
    path = tmp_path / "articles.jsonl"
    rows = [{"body": f"Article {i} explains how rivers shape valleys over time."} for i in range(6)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    task = build_task("writing", {"dataset": str(path), "text_column": "body", "eval_items": 2}, 2)
    assert len(task.train_dataset) == 4 and len(task.eval_dataset) == 2
    assert task.train_dataset[0]["prompt"].startswith("Article 0")
    with pytest.raises(TaskError, match="has no column 'text'"):
        build_task("writing", {"dataset": str(path)}, 2)
    with pytest.raises(TaskError, match="ratio_high must be >= ratio_low"):
        build_task("writing", {"ratio_low": 3.0, "ratio_high": 2.0}, 2)
