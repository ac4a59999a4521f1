"""CoMLRL's TLDR and arXiv writing benchmarks: the level reward by hand, the data and the held-out split."""

from __future__ import annotations

import pytest

from engine.tasks import TaskError, build_task
from engine.tasks.comlrl_writing import (
    ARXIV,
    SPLIT_MARKER,
    TLDR,
    content_jaccard,
    level_terms,
    ramp_gate,
    transition_score,
)
from tests.engine.tasks.comlrl_fixtures import TEXTS, writing_files


def words(n: int, stem: str = "w") -> str:
    return " ".join(f"{stem}{i}" for i in range(n))


def test_ramp_gate_by_hand():
    bounds = (1.1, 1.6, 3.2, 5.0)
    assert ramp_gate(2.0, bounds) == 1.0
    assert ramp_gate(1.35, bounds) == pytest.approx(0.5)  # (1.35 - 1.1) / 0.5
    assert ramp_gate(4.1, bounds) == pytest.approx(0.5)  # 1 - (4.1 - 3.2) / 1.8
    assert ramp_gate(1.1, bounds) == 0.0  # the end of the acceptable range still passes the gate
    assert ramp_gate(1.0, bounds) is None and ramp_gate(5.1, bounds) is None


def test_transition_words_count_categories_as_whole_words():
    assert transition_score("plain words only") == 0.0
    assert transition_score("However, it rained.") == pytest.approx(0.4)
    assert transition_score("However, for example, it rained; therefore we stayed.") == pytest.approx(0.5)
    assert transition_score("also") == 0.0  # no category matches inside another word


def test_content_jaccard_ignores_stopwords():
    assert content_jaccard("the cat sat", "a cat ran") == pytest.approx(1 / 3)  # {cat, sat} vs {cat, ran}
    assert content_jaccard("the", "a") == 1.0  # both without content words


def test_tldr_levels_by_hand():
    first = words(10)  # 10 words, 10 distinct, 29 characters
    second = words(24)  # 24 distinct words, 85 characters: char ratio 2.93 (full), unique ratio 2.4 (full)
    terms = level_terms(first, second, TLDR)
    # structure 0.5; coordination 1; vocabulary 0.5; style: no transitions, Jaccard 10/24 capped at 0.03 -> 0.6
    assert terms == pytest.approx({"structure": 0.5, "coordination": 1.0, "vocabulary": 0.5, "style": 0.6})
    assert sum(terms.values()) == pytest.approx(2.6)
    with_transition = level_terms(first, second + " however", TLDR)
    assert with_transition["style"] == pytest.approx(0.4 * 0.4 + 0.6)


def test_tldr_gates_stop_the_ladder():
    # a part out of the word range: nothing at all
    assert level_terms(words(5), words(24), TLDR) == {"structure": 0.0, "coordination": 0.0, "vocabulary": 0.0,
                                                      "style": 0.0}
    # the same length twice: ratio 1.0 is outside 1.1-5.0, the ladder stops after structure
    same = level_terms(words(10), words(10, "v"), TLDR)
    assert same == {"structure": 0.5, "coordination": 0.0, "vocabulary": 0.0, "style": 0.0}
    # long enough (71 characters, ratio 2.45) but repeating one word: unique ratio 1/10 < 1.3 stops before style
    repeated = level_terms(words(10), " ".join(["again"] * 12), TLDR)
    assert repeated["coordination"] > 0 and repeated["vocabulary"] == 0.0 and repeated["style"] == 0.0


def test_arxiv_levels_by_hand():
    first = words(130, "a")  # 130 distinct words
    second = words(130, "b") + " however"  # 131 distinct: unique ratio 1.008 (full), char ratio about 1.01
    terms = level_terms(first, second, ARXIV)
    ratio = len(second) / len(first)
    assert terms["structure"] == 0.5
    assert terms["coordination"] == pytest.approx((ratio - 0.8) / 0.5)
    assert terms["vocabulary"] == 0.5
    # arXiv reads transitions in both parts; no shared content words: Jaccard 0
    assert terms["style"] == pytest.approx(0.4 * 0.4)
    # arXiv wants 128-256 words per part: a TLDR-sized answer earns nothing
    assert sum(level_terms(words(10), words(24), ARXIV).values()) == 0.0


def test_one_agent_writes_both_parts_around_the_marker(tmp_path):
    train, held_out = writing_files(tmp_path)
    task = build_task("tldr", {"dataset": train, "eval_dataset": held_out}, 1)
    assert task.roles == ["writer"] and SPLIT_MARKER in task.formatters[0](task.train_dataset[0])
    joint = f"{words(10)}\n{SPLIT_MARKER}\n{words(24)}"
    totals, terms = task.reward_func.score([[joint, words(34)]], batch_items=[task.train_dataset[0]] * 2, prompts=None)
    assert terms["structure"] == [0.5, 0.0]  # without the marker there is no second part
    assert totals[0] == pytest.approx(2.6)


def test_team_task_reads_local_files_and_keeps_the_split(tmp_path):
    train, held_out = writing_files(tmp_path, column="abstract")
    task = build_task("arxiv", {"dataset": train, "eval_dataset": held_out}, 2)
    assert task.roles == ["background", "method"]
    assert [row["prompt"] for row in task.train_dataset] == TEXTS[:4]
    assert [row["prompt"] for row in task.eval_dataset] == TEXTS[4:]
    assert TEXTS[0] in task.formatters[0](task.train_dataset[0])
    rows = task.eval_logger(agent_completions_turns=[[[words(10)]], [[words(24)]]], batch_items=[{}])
    assert rows[0]["turn_1/level_total"] == 0.0  # arXiv's word range


def test_overlapping_splits_and_missing_data_are_refused(tmp_path):
    train, _ = writing_files(tmp_path)
    with pytest.raises(TaskError, match="evaluation texts are also training texts"):
        build_task("tldr", {"dataset": train, "eval_dataset": train}, 2)
    with pytest.raises(TaskError, match="no column 'body'"):
        build_task("tldr", {"dataset": train, "eval_dataset": None, "text_column": "body"}, 2)
    held = build_task("tldr", {"dataset": train, "eval_dataset": None, "eval_items": 1}, 2)
    assert len(held.train_dataset) == 3 and len(held.eval_dataset) == 1
