"""The resource budget (:mod:`engine.schema.budget`): sizes computed by hand, each refusal naming the field,
the size, the limit and the setting; devices checked against a known count, or only by name."""

from __future__ import annotations

import pytest

from engine.schema.budget import Budget, RunLimits, budget_problems, device_problems, limit_problems
from engine.schema.preflight import check_preflight, preflight_problems
from engine.schema.run_config import ConfigError, parse_run_config


def config(agents: list[dict] | None = None, **trainer: object):
    group = {"num_generations": 2} if trainer.get("algorithm", "magrpo") == "magrpo" else {}
    return parse_run_config({"agents": agents or [{"name": "a"}, {"name": "b"}], "task": {"name": "quickstart"},
                             "trainer": {**group, **trainer}})


def fields(problems) -> dict[str, str]:
    return {f: m for f, m in problems}


def test_tokens_per_step_by_hand():
    # 3 items (rollout buffer) x 2 agents x K=4 completions at 1 + 4 nodes (2 aligned turns) x 10 tokens = 1200
    budget = Budget(max_tokens_per_step=1200)
    assert budget_problems(config(num_generations=4, num_turns=2, rollout_buffer_size=3, max_new_tokens=10),
                           budget) == []
    over = fields(budget_problems(config(num_generations=4, num_turns=2, rollout_buffer_size=3, max_new_tokens=11),
                                  budget))
    message = over["trainer.num_generations"]
    assert "1,320 tokens" in message and "limit of 1,200" in message and "COOPLAB_MAX_TOKENS_PER_STEP" in message
    assert "3 items x 2 agents x 20 completions each x 11 max_new_tokens" in message


def test_an_agent_override_of_max_new_tokens_counts():
    budget = Budget(max_tokens_per_step=2 * 2 * 2 * 100)  # 2 items x 2 agents x K=2 x 100 tokens
    assert budget_problems(config([{"name": "a"}, {"name": "b", "max_new_tokens": 100}], max_new_tokens=8),
                           budget) == []
    assert "trainer.num_generations" in fields(budget_problems(
        config([{"name": "a"}, {"name": "b", "max_new_tokens": 101}], max_new_tokens=8), budget))


def test_cross_mode_joint_actions_by_hand():
    # cross K=3, N=2: 9 joint actions per node; two turns: 1 + 9 nodes, 9 x 10 = 90 per item; 2 items: 180
    budget = Budget(max_joint_actions_per_step=180)
    assert budget_problems(config(num_generations=3, joint_mode="cross", num_turns=2), budget) == []
    message = fields(budget_problems(config(num_generations=3, joint_mode="cross", num_turns=2),
                                     Budget(max_joint_actions_per_step=179)))["trainer.joint_mode"]
    assert "180 joint actions" in message and "3^2 cross" in message and "COOPLAB_MAX_JOINT_ACTIONS_PER_STEP" in message


def test_a_deep_cross_tree_saturates_instead_of_computing_a_huge_power():
    problems = fields(budget_problems(config(num_generations=4096, joint_mode="cross", num_turns=10**6), Budget()))
    assert "trainer.joint_mode" in problems and "trainer.num_generations" in problems  # answered at once


def test_counts_names_and_free_text():
    problems = fields(budget_problems(config([{"name": "x" * 129}, {"name": "b", "system_prompt": "s" * 70_000}],
                                             max_steps=2_000_000, transcripts_per_step=1001, eval_num_samples=100_001),
                                      Budget()))
    assert "2,000,000 repetitions" in problems["trainer.max_steps"] and "COOPLAB_MAX_ITERATIONS" in problems[
        "trainer.max_steps"]
    assert "1,001 episodes per step" in problems["trainer.transcripts_per_step"]
    assert "100,001 evaluation items" in problems["trainer.eval_num_samples"]
    assert problems["agents.0.name"].startswith("129 characters, over the limit of 128 characters for a name")
    assert problems["agents.1.system_prompt"].startswith("70,000 characters, over the limit of 65,536")
    assert budget_problems(config([{"name": "x" * 128}, {"name": "b"}]), Budget()) == []


def test_preference_candidates_and_their_collection_tokens():
    problems = fields(budget_problems(config(algorithm="madpo", preference_num_candidates=5000), Budget()))
    assert "5,000 samples per agent and node" in problems["trainer.preference_num_candidates"]
    # 1 item x 2 agents x (300 + 300) candidates x 1 turn x 100 tokens = 120,000
    problems = fields(budget_problems(config(algorithm="madpo", preference_num_candidates=300, max_new_tokens=100),
                                      Budget(max_tokens_per_step=119_999)))
    assert "120,000 tokens" in problems["trainer.preference_num_candidates"]


def test_devices_by_name_and_by_count():
    cfg = config([{"name": "a", "device": "cuda:99"}, {"name": "b", "device": "gpu"}],
                 reference_devices=["cuda:1"])
    by_name = fields(device_problems(cfg, None))
    assert set(by_name) == {"agents.1.device"} and "not a device" in by_name["agents.1.device"]
    counted = fields(device_problems(cfg, 2, "on this machine"))
    assert counted["agents.0.device"] == ("cuda:99 does not exist on this machine (2 CUDA devices: cuda:0, cuda:1); "
                                          "use cuda:0 or leave it empty")
    assert "trainer.reference_devices.0" not in counted
    assert "no CUDA device" in fields(device_problems(cfg, 0))["trainer.reference_devices.0"]


def test_the_queue_sets_trainer_device_so_it_is_not_counted():
    cfg = config(device="cuda:0")
    assert device_problems(cfg, 0, queue_sets_device=True) == []
    assert "trainer.device" in fields(device_problems(cfg, 0))


def test_preflight_reports_the_limits_with_the_other_problems():
    cfg = config([{"name": "a", "device": "cuda:5"}, {"name": "b"}], transcripts_per_step=5000)
    problems = {p.field for p in preflight_problems(cfg, hub_cache_dirs=[], limits=RunLimits(cuda_devices=1))}
    assert problems == {"agents.0.device", "trainer.transcripts_per_step"}
    with pytest.raises(ConfigError, match="trainer.transcripts_per_step: records 5,000 episodes per step"):
        check_preflight(cfg, hub_cache_dirs=[])  # the default budget without limits


def test_limit_problems_without_a_write_area_skip_the_folders():
    assert limit_problems(config(), RunLimits()) == []
