"""A run config may not ask for any size: pre-flight refuses what exceeds the operator's budget
(``COOPLAB_MAX_*``), naming the field, the size it computed, the limit and the setting that raises it;
devices that do not exist are refused before the run is queued and again in the worker."""

from __future__ import annotations

import pytest

from db import states
from engine.schema.run_config import ConfigError
from jobs.client import submit_run
from jobs.executor import execute_run
from jobs.preflight import check_run_config
from jobs.settings import Settings


def config(agents: list[dict] | None = None, **trainer: object) -> dict:
    group = {"num_generations": 2} if trainer.get("algorithm", "magrpo") == "magrpo" else {}
    return {"name": "budget", "agents": agents or [{"name": "first"}, {"name": "second"}],
            "task": {"name": "quickstart"}, "trainer": {**group, **trainer}}


def refused(data: dict, settings: Settings) -> str:
    with pytest.raises(ConfigError) as caught:
        check_run_config(data, settings=settings)
    return str(caught.value)


@pytest.mark.parametrize(("trainer", "field", "size", "limit", "setting"), [
    ({"algorithm": "madpo", "preference_num_candidates": 100_000}, "trainer.preference_num_candidates", "100,000",
     "4,096", "COOPLAB_MAX_SAMPLES_PER_NODE"),
    ({"algorithm": "madpo_iter", "num_iterations": 10**9}, "trainer.num_iterations", "1,000,000,000", "1,000,000",
     "COOPLAB_MAX_ITERATIONS"),
    # K = 10^6 samples x 2000 tokens x 2 agents (x 2 items: the rollout buffer) = 8e9 tokens in one step
    ({"num_generations": 10**6, "max_new_tokens": 2000}, "trainer.num_generations", "8,000,000,000",
     "100,000,000", "COOPLAB_MAX_TOKENS_PER_STEP"),
    # cross: 4096^2 joint actions per item, 2 items per step
    ({"num_generations": 4096, "joint_mode": "cross"}, "trainer.joint_mode", "33,554,432", "1,000,000",
     "COOPLAB_MAX_JOINT_ACTIONS_PER_STEP"),
    ({"eval_num_samples": 10**9}, "trainer.eval_num_samples", "1,000,000,000", "100,000",
     "COOPLAB_MAX_EVAL_SAMPLES"),
    ({"transcripts_per_step": 10**9}, "trainer.transcripts_per_step", "1,000,000,000", "1,000",
     "COOPLAB_MAX_TRANSCRIPTS_PER_STEP"),
])
def test_sizes_beyond_the_budget_are_refused_naming_field_size_limit_and_setting(jobs_env, trainer, field, size,
                                                                                 limit, setting):
    message = refused(config(**trainer), jobs_env)
    lines = [line for line in message.splitlines() if line.startswith(f"{field}:") and setting in line]
    assert len(lines) == 1, message
    assert size in lines[0] and limit in lines[0], lines[0]


def test_a_one_megabyte_agent_name_is_refused(jobs_env):
    message = refused(config([{"name": "a" * 2**20}, {"name": "second"}]), jobs_env)
    assert message.startswith("agents.0.name:") and "1,048,576 characters" in message and "128" in message
    assert len(message) < 1000  # the name itself is not echoed back


def test_an_operator_raises_a_limit_with_its_setting(jobs_env, monkeypatch):
    big = config(transcripts_per_step=5000)
    refused(big, jobs_env)
    monkeypatch.setenv("COOPLAB_MAX_TRANSCRIPTS_PER_STEP", "10000")
    check_run_config(big, settings=Settings())


def test_real_research_sizes_fit_the_default_budget(jobs_env):
    check_run_config(config(num_generations=16, max_new_tokens=2000, items_per_step=8,
                            rollout_buffer_size=8, eval_num_samples=1000, transcripts_per_step=16, max_steps=20_000),
                     settings=jobs_env)
    check_run_config(config(num_generations=8, joint_mode="cross", max_new_tokens=1024), settings=jobs_env)
    check_run_config(config(algorithm="madpo_iter", preference_num_candidates=256, num_iterations=50,
                            max_new_tokens=2000), settings=jobs_env)


def test_a_device_that_does_not_exist_in_the_job_is_refused_before_queueing(jobs_env, store, experiment_id):
    data = config([{"name": "first", "device": "cuda:99"}, {"name": "second"}])
    with pytest.raises(ConfigError, match=r"agents\.0\.device: cuda:99 does not exist"):
        submit_run(data, experiment_id=experiment_id, device="cuda:0", settings=jobs_env)
    with pytest.raises(ConfigError, match=r"agents\.0\.device: cuda:99 does not exist"):
        submit_run(data, experiment_id=experiment_id, device="cpu", settings=jobs_env)
    assert store.list_runs(experiment_id) == []  # nothing stored


def test_the_worker_refuses_a_device_it_does_not_have(jobs_env, store, experiment_id):
    data = config([{"name": "first", "device": "cuda:99"}, {"name": "second"}], max_steps=1, max_new_tokens=4)
    run = store.create_run(experiment_id, data, "cpu")  # stored as it is: pre-flight ran elsewhere, or not at all
    assert execute_run(run.id, settings=jobs_env, store=store) == states.FAILED
    error = store.get_run(run.id).error
    assert "agents.0.device: cuda:99 does not exist" in error, error
