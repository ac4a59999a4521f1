"""One-agent multi-turn tasks: self-refinement with feedback and role-switching self-play."""

from __future__ import annotations

from engine.tasks import build_task
from engine.tasks.self_play import role_of_prompt, summary_feedback

SOURCE = "Bread is made from flour, water, salt and yeast. The yeast makes the dough rise."


def test_feedback_is_concrete():
    assert "It has 2 words; write at least 8." in summary_feedback("Bread rises.", SOURCE, (8, 40))
    assert "cut it to at most 3" in summary_feedback("Bread is made from flour and yeast.", SOURCE, (1, 3))
    assert "key words" in summary_feedback("Something unrelated about cars and roads today.", SOURCE, (2, 40))


def test_self_refine_revises_with_feedback_and_scores_each_turn():
    task = build_task("self_refine", {"eval_items": 2}, 1)
    item = task.train_dataset[0]
    first = task.formatters[0](item)
    assert first.startswith("Summarise the text below") and item["prompt"] in first
    (second,) = task.external_transition(
        prompt=item["prompt"], agent_completions=["Too short."], num_agents=1,
        prompt_history_per_agent=[[first]], response_history_per_agent=[["Too short."]],
    )
    assert "Your previous answer:\nToo short." in second and "write at least 8" in second
    assert item["prompt"] in second
    totals, terms = task.reward_func.score([["Too short.", item["prompt"][:120]]], [item, item], None)
    assert terms["length"][0] < terms["length"][1] and terms["relevance"][1] == 1.0
    assert totals[1] > totals[0]


def test_role_switch_alternates_roles_and_scores_by_role():
    task = build_task("role_switch", {}, 1)
    item = task.train_dataset[0]
    first = task.formatters[0](item)
    assert role_of_prompt(first) == "summarizer"
    (second,) = task.external_transition(
        prompt=item["prompt"], agent_completions=["short summary"], num_agents=1,
        prompt_history_per_agent=[[first]], response_history_per_agent=[["short summary"]],
    )
    assert role_of_prompt(second) == "elaborator" and "short summary" in second
    (third,) = task.external_transition(
        prompt=item["prompt"], agent_completions=["long elaboration"], num_agents=1,
        prompt_history_per_agent=[[first, second]], response_history_per_agent=[["a", "long elaboration"]],
    )
    assert role_of_prompt(third) == "summarizer"
    _, terms = task.reward_func.score([[" ".join(["w"] * 50), " ".join(["w"] * 50)]], [item, item], [[first, second]])
    assert terms["length"] == [0.75, 1.0]  # 50 words: summary range 8-40 ramps to 0 at 80; elaboration 20-120
