"""One record per agent (AgentSetup) and CoMLRL's parallel per-agent lists build the same team."""

from __future__ import annotations

import pytest

from engine import MAGRPOTrainer
from engine.trainer.setup import AgentSetup, comlrl_agents
from tests.engine.trainer.trainer_helpers import DATA, fast_config, length_reward


def plan(item):
    return "Plan: " + item["prompt"]


def test_records_and_comlrl_lists_give_the_same_agents(team) -> None:
    (m1, m2), (t1, t2) = team
    lists = MAGRPOTrainer(agents=[m1, m2], tokenizer=[t1, t2], train_dataset=DATA, reward_func=length_reward,
                          args=fast_config(), formatters=[plan, plan], agent_names=["planner", "coder"],
                          agent_learning_rates=[None, 2e-3], agent_generation=[{"temperature": 0.5}, None],
                          system_prompts=["You plan.", None])
    records = MAGRPOTrainer(
        agents=[AgentSetup("planner", m1, t1, formatter=plan, system_prompt="You plan.", temperature=0.5),
                AgentSetup("coder", m2, t2, formatter=plan, learning_rate=2e-3)],
        train_dataset=DATA, reward_func=length_reward, args=fast_config())
    for a, b in zip(lists.agents, records.agents, strict=True):
        assert (a.name, a.model, a.tokenizer, a.formatter, a.system_prompt, a.learning_rate, a.generation) == \
               (b.name, b.model, b.tokenizer, b.formatter, b.system_prompt, b.learning_rate, b.generation)
    assert records.agent_names == ["planner", "coder"]
    assert [a.learning_rate for a in records.agents] == [1e-3, 2e-3]  # None: the config's agent_learning_rate
    assert [a.generation.temperature for a in records.agents] == [0.5, fast_config().temperature]


def test_comlrl_arguments_become_one_record_per_agent() -> None:
    setups = comlrl_agents(fast_config(), agent_model="some/model", agents=None, num_agents=2, tokenizer=None,
                           formatters=None, agent_names=None, agent_learning_rates=[3e-4, None],
                           agent_generation=[None, {"max_new_tokens": 3, "top_k": None}], system_prompts=None)
    assert [s.name for s in setups] == ["agent_0", "agent_1"] and [s.model for s in setups] == ["some/model"] * 2
    assert (setups[0].learning_rate, setups[1].learning_rate) == (3e-4, None)
    assert (setups[1].max_new_tokens, setups[1].top_k) == (3, None)


def test_records_carry_every_per_agent_setting(team) -> None:
    (m1, m2), (t1, t2) = team
    with pytest.raises(ValueError, match="AgentSetup records carry each agent's settings.*system_prompts"):
        MAGRPOTrainer(agents=[AgentSetup("a", m1, t1), AgentSetup("b", m2, t2)], system_prompts=["x", "y"],
                      train_dataset=DATA, reward_func=length_reward, args=fast_config())
    with pytest.raises(ValueError, match="agent_names must be 2 distinct names"):
        MAGRPOTrainer(agents=[AgentSetup("a", m1, t1), AgentSetup("a", m2, t2)], train_dataset=DATA,
                      reward_func=length_reward, args=fast_config())
