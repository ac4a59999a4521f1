"""The credit-assignment bench: its statistics by hand, its plan and configs, its tasks' rewards, and one
tiny end-to-end comparison whose tables must have every row and field."""

from __future__ import annotations

import json
import math

import pytest

from bench.training.credit import ESTIMATORS, TIS_ARMS, applies, main, markdown, plan
from bench.training.credit_report import (
    NOT_APPLICABLE,
    learning_table,
    mean_se,
    paired_difference,
    summarize_cell,
)
from bench.training.credit_runs import ARM_SETTINGS, RunResult, collect, eval_config, run_config
from bench.training.credit_tasks import (
    FEEDBACK_TEMPLATE,
    FeedbackParams,
    NoisyPartsParams,
    build_feedback,
    noisy_parts_reward,
    score_feedback,
)


def test_mean_and_standard_error_by_hand() -> None:
    assert mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0 / math.sqrt(3)))  # sd 1
    assert mean_se([0.5]) == (0.5, 0.0)
    with pytest.raises(ValueError, match="no values"):
        mean_se([])


def _seed(before: float, after: float, rewards: list[float], wall: float, calls: float | None, seed: int = 0) -> dict:
    result = RunResult(after={"value": after}, rewards=rewards, wall_s=wall, status="completed",
                       sums={} if calls is None else {"perf/credit_reward_calls": calls},
                       means={"perf/sampler_kl": 0.25 * wall})
    return {"seed": seed, "before": {"value": before}, **result.to_json()}


def test_a_cell_summarises_its_seeds_by_hand() -> None:
    # 10 steps: the last fifth is the last 2 rewards
    seeds = [_seed(0.2, 0.6, [0.0] * 8 + [0.4, 0.6], 10.0, 100.0), _seed(0.4, 0.6, [0.0] * 8 + [0.8, 1.0], 20.0, 300.0)]
    cell = summarize_cell(seeds)
    assert cell["before"] == pytest.approx((0.3, 0.1))  # sd of (0.2, 0.4) = 0.1414, / sqrt(2)
    assert cell["after"] == pytest.approx((0.6, 0.0))
    assert cell["gain"] == pytest.approx((0.3, 0.1))
    assert cell["last_fifth"] == pytest.approx((0.7, 0.2))  # 0.5 and 0.9
    assert cell["wall_s"] == pytest.approx((15.0, 5.0))
    assert cell["credit_reward_calls"] == 200.0 and cell["means"] == {"perf/sampler_kl": pytest.approx(3.75)}
    assert "credit_reward_calls" not in summarize_cell([seeds[0], _seed(0.2, 0.6, [0.5], 1.0, None)])


def test_the_paired_difference_takes_each_seeds_difference_first() -> None:
    arm = [_seed(0.2, 0.5, [0.1], 1.0, None, seed=0), _seed(0.2, 0.9, [0.1], 1.0, None, seed=1)]
    reference = [_seed(0.2, 0.8, [0.1], 1.0, None, seed=1), _seed(0.2, 0.3, [0.1], 1.0, None, seed=0)]
    assert paired_difference(arm, reference) == pytest.approx((0.15, 0.05))  # 0.2 and 0.1: sd 0.0707 / sqrt(2)
    with pytest.raises(ValueError, match="no seed"):
        paired_difference(arm, reference[:1])


def test_metrics_are_summed_or_averaged_over_steps() -> None:
    steps = [{"perf/credit_reward_calls": 16.0, "perf/sampler_kl": 0.1, "perf/tis_clipped": 0.0,
              "agent/first/credit": 0.2, "agent/first/loss": 9.0, "train/reward_mean": 0.5},
             {"perf/credit_reward_calls": 72.0, "agent/first/credit": 0.4}]
    sums, means = collect(steps)
    assert sums == {"perf/credit_reward_calls": 88.0}
    assert means == pytest.approx({"perf/sampler_kl": 0.1, "perf/tis_clipped": 0.0, "agent/first/credit": 0.3})


def test_arms_differ_only_in_their_settings_and_are_evaluated_alike() -> None:
    group = run_config("noisy_parts", 2, arm=ESTIMATORS["group"])
    counterfactual = run_config("noisy_parts", 2, arm=ESTIMATORS["counterfactual"])
    bf16 = run_config("noisy_parts", 2, arm=TIS_ARMS["bf16_tis"])
    assert group["task"]["params"] == {"parts": "digits_capitals", "noise_std": 0.1, "noise_seed": 2}
    assert [a["model_kwargs"]["seed"] for a in group["agents"]] == [200, 201]
    assert group["trainer"]["max_steps"] == 60 and group["trainer"]["seed"] == 2
    assert {k: v for k, v in counterfactual["trainer"].items() if group["trainer"].get(k) != v} == {
        "credit_assignment": "counterfactual"}
    assert run_config("noisy_parts", 2, steps=3)["trainer"]["max_steps"] == 3
    evaluated = [eval_config(c) for c in (group, counterfactual, bf16)]
    assert evaluated[0] == evaluated[1] == evaluated[2]
    assert evaluated[0]["task"]["params"]["noise_std"] == 0.0
    assert evaluated[0]["trainer"]["rollout_dtype"] == "float32" and group["trainer"]["rollout_dtype"] == "float32"
    assert set(ARM_SETTINGS) & set(evaluated[0]["trainer"]) == {"rollout_dtype"}
    assert bf16["trainer"]["rollout_dtype"] == "bfloat16"


def test_turn_group_is_planned_on_multi_turn_tasks_only() -> None:
    assert not applies("turn_group", "quickstart") and applies("turn_group", "feedback")
    assert applies("counterfactual", "quickstart")
    runs = plan(["quickstart", "feedback"], ["group", "turn_group"], ["quickstart"], ["float32", "bf16_none"],
                [0, 1], None)
    seed0 = [(table, task, arm) for table, task, arm, seed, _ in runs if seed == 0]
    assert seed0 == [("learning", "quickstart", "group"), ("tis", "quickstart", "float32"),
                     ("tis", "quickstart", "bf16_none"), ("learning", "feedback", "group"),
                     ("learning", "feedback", "turn_group")]
    assert [seed for *_, seed, _ in runs] == [0] * 5 + [1] * 5


def test_the_noisy_parts_reward_by_hand() -> None:
    exact = noisy_parts_reward("digits_capitals", 0.0, 0)
    totals, terms = exact.score([["12ab", "abcd"], ["ABcd", "x"]], [{}])
    assert terms == {"first_part": [0.5, 0.0], "second_part": [0.5, 0.0]} and totals == [0.5, 0.0]
    letters, _ = noisy_parts_reward("letters", 0.0, 0).score([["abnz"], ["nnna"]], [{}])
    assert letters == [0.5 * 0.5 + 0.5 * 0.75]
    noisy = [noisy_parts_reward("digits_capitals", 0.1, seed).score([["12ab"] * 200, ["ABcd"] * 200], [{}])[0]
             for seed in (0, 0, 1)]
    assert noisy[0] == noisy[1] != noisy[2]  # seeded
    deviations = [x - 0.5 for x in noisy[0]]  # 0.5 * (n1 + n2): sd 0.1 / sqrt(2)
    assert abs(sum(deviations) / 200) < 0.02 and 0.05 < math.sqrt(sum(d * d for d in deviations) / 200) < 0.09


def test_the_feedback_task_shows_each_agent_both_scores() -> None:
    task = build_feedback(FeedbackParams(num_items=2, eval_items=1), 2)
    assert len(task.train_dataset) == 2 and len(task.eval_dataset) == 1 and task.max_turns is None
    prompt = task.formatters[0](task.train_dataset[0])
    assert prompt == "Topic: animals. Write numbers:\n" and task.formatters[1]({"prompt": "x"}, "given") == "given"
    following = task.external_transition(prompt="Topic: animals.", agent_completions=["1a", "ABCD"], num_agents=2,
                                         prompt_history_per_agent=[[prompt], ["p"]])
    assert following[0] == FEEDBACK_TEMPLATE.format(original="Topic: animals. Write numbers:", previous="1a",
                                                    feedback=score_feedback(0.5, 1.0)).strip()
    assert "Your part scored 1.00. Partner: 0.50." in following[1]
    assert NoisyPartsParams().noise_std == 0.1 and FeedbackParams().noise_std == 0.0


def test_a_row_that_does_not_apply_says_why() -> None:
    cell = summarize_cell([_seed(0.2, 0.5, [0.3], 1.0, 16.0)])
    table = learning_table({"quickstart": {"group": cell, "turn_group": None}}, {"group": "group"})
    rows = table.splitlines()
    assert len(rows) == 4 and NOT_APPLICABLE in rows[3] and rows[2].startswith("| quickstart | group | 0.200 ± 0.000 "
                                                                          "| 0.500 ± 0.000 | - | 0.300 ± 0.000 |")
    assert all(row.count("|") == 10 for row in rows)


@pytest.mark.slow
def test_one_tiny_comparison_end_to_end(capsys) -> None:
    """Every table row and field from a real (1-step) run of each kind; fails when a run or a metric breaks."""
    result = main(["--tasks", "quickstart,feedback", "--estimators", "group,counterfactual,turn_group", "--seeds", "0",
                   "--steps", "1", "--tis-tasks", "quickstart", "--tis-arms", "float32,bf16_tis", "--samples", "2",
                   "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["learning"]["quickstart"]["turn_group"] is None and printed["steps"] == {"quickstart": 1,
                                                                                            "feedback": 1}
    for task, arms in (("quickstart", ("group", "counterfactual")), ("feedback", ("group", "counterfactual",
                                                                                  "turn_group"))):
        for arm in arms:
            cell = result["learning"][task][arm]
            record = result["records"]["learning"][task][arm][0]
            assert cell["seeds"] == 1 and 0.0 <= cell["after"][0] <= 1.0 and cell["wall_s"][0] > 0
            assert record["status"] == "completed" and len(record["rewards"]) == 1
            assert record["after"]["items"] == 12 and cell["credit_reward_calls"] > 0
        group, counterfactual = (result["learning"][task][a]["credit_reward_calls"] for a in ("group", "counterfactual"))
        assert counterfactual > group  # the replaced joint actions are extra reward calls
        assert {"agent/first/credit", "agent/second/credit"} <= set(result["learning"][task]["group"]["means"])
    assert result["records"]["tis"]["quickstart"]["float32"] == result["records"]["learning"]["quickstart"]["group"]
    # the estimators sample from the float32 weights: no sampler mismatch logged, whatever rollout_dtype's default
    assert not [k for k in result["learning"]["quickstart"]["group"]["means"] if "sampler_kl" in k]
    assert "perf/sampler_kl" in result["tis"]["quickstart"]["bf16_tis"]["means"]
    tables = markdown(result).splitlines()
    learning_rows = [r for r in tables if r.startswith("| quickstart |") or r.startswith("| feedback |")]
    assert len(learning_rows) == 3 + 3 + 2  # 3 learning rows per task (one n/a) + 2 TIS rows
    assert all(r.count("|") == 10 for r in learning_rows[:6]) and all(r.count("|") == 11 for r in learning_rows[6:])
    vs_group = result["learning"]["feedback"]["counterfactual"]["vs_reference"]
    assert vs_group[0] == pytest.approx(result["learning"]["feedback"]["counterfactual"]["after"][0]
                                        - result["learning"]["feedback"]["group"]["after"][0])
    assert "vs_reference" not in result["learning"]["feedback"]["group"]
