"""The centralized baseline: the tagged protocol (prompt, split, reward on the roles), and
CentralizedMAGRPOTrainer training one model whose completion is split for the reward, the
evaluation hooks and pass@k; the run-config path loads one model for every role."""

from __future__ import annotations

import pytest

from engine import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer, MAGRPOConfig, RewardProcessors
from engine.models.tiny import build_tiny_model
from engine.preference.centralized import (
    CentralizedCollaboration,
    CentralizedComparatorParseError,
    TaggedCentralizedComparatorAdapter,
)
from engine.rewards.team_reward import TeamReward
from engine.schema.configure import trainer_config
from engine.schema.run_config import ConfigError, parse_run_config
from engine.sinks import MemorySink

TAGS = TaggedCentralizedComparatorAdapter()


def test_tagged_prompt_and_split() -> None:
    prompt = TAGS.build_prompt({}, ["Plan it.", "Do it."])
    assert "Agent 0 original prompt:\nPlan it." in prompt and "Agent 1 original prompt:\nDo it." in prompt
    assert "<agent_1>\n...\n</agent_1>" in prompt
    assert TAGS.parse_completion("x <AGENT_1> b </agent_1><agent_0>\n a \n</agent_0>", {}, 2) == ["a", "b"]
    assert TAGS.parse_completion("<agent_0>only</agent_0>", {}, 2) == ["only", ""]  # a missing role is empty
    with pytest.raises(CentralizedComparatorParseError):
        TAGS.parse_completion("no tags at all", {}, 2)


def test_collaboration_scores_the_roles_and_counts_unparsed_completions() -> None:
    calls = []

    def reward(c1, c2):
        calls.append((c1[0], c2[0]))
        return [len(c1[0]) + 10 * len(c2[0])]

    collab = CentralizedCollaboration(TAGS, [lambda item: f"A {item['p']}", lambda item: "B"],
                                      TeamReward(reward, RewardProcessors.shift(1.0)), 2)
    assert "Agent 0 original prompt:\nA q" in collab.build_prompt({"p": "q"})
    totals, _ = collab.score([["<agent_0>ab</agent_0><agent_1>c</agent_1>", "garbage"]], [{"p": "q"}] * 2,
                             [["joint", "joint"]])
    assert calls == [("ab", "c"), ("", "")]
    assert totals == [2 + 10 + 1.0, 0 + 1.0]  # the role reward, then its processor
    assert collab.take_unparsed_share() == 0.5 and collab.take_unparsed_share() is None


class HalvesAdapter:
    """Role 0 writes the first half of the completion, role 1 the second (no tags to learn)."""

    def build_prompt(self, batch_item, agent_prompts):
        return " | ".join(agent_prompts)

    def parse_completion(self, completion, batch_item, num_agents):
        half = len(completion) // 2
        return [completion[:half], completion[half:]]


def test_one_model_is_trained_on_the_joint_completion_split_for_reward_and_evaluation() -> None:
    model, tok = build_tiny_model("llama", "xs", seed=0)
    seen, logged, checked = [], [], []

    def reward(c1, c2):
        seen.append((c1[0], c2[0]))
        return [sum(ch.isdigit() for ch in c1[0] + c2[0]) / 8.0]

    def eval_logger(agent_completions_turns, batch_items=None):
        logged.append(agent_completions_turns)
        return [{"len0": len(agent_completions_turns[0][0][0])}]

    def check(item, roles):
        checked.append(roles)
        return False

    sink = MemorySink()
    config = CentralizedMAGRPOConfig(num_generations=4, max_new_tokens=8, max_steps=2, logging_steps=1,
                                     eval_interval=2, eval_num_samples=1, agent_learning_rate=1e-3, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = CentralizedMAGRPOTrainer(
        agents=[model, model], tokenizer=[tok, tok], train_dataset=[{"prompt": "1"}, {"prompt": "2"}],
        eval_dataset=[{"prompt": "3"}], reward_func=reward, formatters=[lambda x: "plan " + x["prompt"],
                                                                       lambda x: "do " + x["prompt"]],
        agent_names=["planner", "doer"], eval_logger=eval_logger, eval_check=check, args=config, sink=sink,
        centralized_adapter=HalvesAdapter())
    assert trainer.num_agents == 1 and trainer.role_names == ["planner", "doer"]
    trainer.train()
    assert len(seen) >= 2 * 4 and all(isinstance(a, str) and isinstance(b, str) for a, b in seen)
    assert sink.steps[0].episodes[0].turns[0].prompt == "plan 1 | do 1"  # the joint prompt, one actor
    assert sink.steps[0].metrics["centralized/unparsed_share"] == 0.0
    assert "agent/joint/loss" in sink.steps[0].metrics
    assert len(logged[0]) == 2 and len(checked[0]) == 2  # [role][item][turn], and the roles to the check
    assert any(not (before[k] == v).all() for k, v in model.state_dict().items())


def test_bad_input_is_named() -> None:
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, _ = build_tiny_model("llama", "xs", seed=1)
    data = [{"prompt": "x"}]
    with pytest.raises(ValueError, match="exactly one model"):
        CentralizedMAGRPOTrainer(agents=[m1, m2], tokenizer=t1, train_dataset=data, reward_func=lambda a, b: [0.0])
    with pytest.raises(ValueError, match="args: CentralizedMAGRPOTrainer takes"):
        CentralizedMAGRPOTrainer(agents=[m1], tokenizer=t1, train_dataset=data, reward_func=lambda a, b: [0.0],
                                 args=MAGRPOConfig())
    with pytest.raises(ValueError, match="num_agents: 3 roles"):
        CentralizedMAGRPOTrainer(agents=[m1], num_agents=3, tokenizer=t1, train_dataset=data,
                                 reward_func=lambda a, b: [0.0])
    with pytest.raises(ValueError, match="num_turns: centralized MAGRPO is single-turn"):
        CentralizedMAGRPOConfig(num_turns=2)


def test_run_config_loads_one_model_for_every_role() -> None:
    def run(second: dict) -> object:
        return parse_run_config({"agents": [{"name": "first"}, {"name": "second", **second}],
                                 "task": {"name": "quickstart"}, "trainer": {"algorithm": "centralized_magrpo"}})

    shared = run({"share_weights_with": "first"})
    cfg = trainer_config(shared.trainer, shared.agents)
    assert isinstance(cfg, CentralizedMAGRPOConfig) and cfg.num_agents == 2 and cfg.advantage_mode == "mean"
    separate = run({})
    with pytest.raises(ConfigError, match="agents.1.share_weights_with: centralized_magrpo trains one model"):
        trainer_config(separate.trainer, separate.agents)


def test_centralized_madpo_compares_joint_completions_of_one_model() -> None:
    from engine import MADPOConfig, MADPOTrainer

    model, tok = build_tiny_model("llama", "xs", seed=0)
    seen, logged = [], []

    def reward(c1, c2):
        seen.append((c1[0], c2[0]))
        return [sum(ch.isdigit() for ch in c1[0] + c2[0]) / 8.0]

    config = MADPOConfig(collaboration_mode="centralized", preference_num_candidates=4, preference_pairs_per_sample=2,
                         max_new_tokens=8, num_train_epochs=1, train_batch_size=4, eval_interval=1, eval_num_samples=1,
                         logging_steps=1, agent_learning_rate=1e-3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = MADPOTrainer(agents=[model, model], tokenizer=tok, train_dataset=[{"prompt": "1"}, {"prompt": "2"}],
                           eval_dataset=[{"prompt": "3"}], reward_func=reward, formatters=[lambda x: "plan " + x["prompt"],
                                                                                          lambda x: "do " + x["prompt"]],
                           eval_logger=lambda agent_completions_turns: logged.append(agent_completions_turns) or [{}],
                           args=config, centralized_adapter=HalvesAdapter())
    trainer.train()
    assert trainer.num_agents == 1 and trainer.collaboration.num_roles == 2 and len(trainer.pairs) > 0
    assert all(len(p.winner_completions) == 1 for p in trainer.pairs)  # one joint completion per side
    assert trainer.pairs[0].prompts == [f"plan {trainer.pairs[0].item_index + 1} | do {trainer.pairs[0].item_index + 1}"]
    assert len(seen) >= 2 * 4 and len(logged[0]) == 2  # the reward and the eval logger see two roles
    assert any(not (before[k] == v).all() for k, v in model.state_dict().items())
