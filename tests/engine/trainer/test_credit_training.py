"""Credit estimators in real training steps of tiny models: what they cost in reward calls, what a
step reports, the combinations refused with their fix, and exact resume with each estimator."""

from __future__ import annotations

import pytest
import torch

from engine import MAGRPOConfig
from engine.models.tiny import build_tiny_model
from engine.schema.errors import ConfigError
from engine.schema.run_config import parse_run_config
from engine.sinks import MemorySink
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer, tiny_team


def test_counterfactual_costs_k_k_minus_1_reward_calls_per_node_for_two_agents_and_no_generation() -> None:
    group = make_trainer(tiny_team(), fast_config(num_generations=3, credit_samples=0, max_steps=1))
    counter = make_trainer(tiny_team(), fast_config(num_generations=3, credit_samples=0, max_steps=1,
                                                credit_assignment="counterfactual"))
    g_metrics, _ = group.train_step()
    c_metrics, _ = counter.train_step()
    nodes = counter.env_step // 3
    assert g_metrics["perf/credit_reward_calls"] == 0.0
    # two agents: every off-diagonal pair (a, b), a != b, once: K (K - 1) per node (agent 0 replaced in
    # (b, b), agent 1 in (a, a)); with N > 2 agents it is N K (K - 1)
    assert c_metrics["perf/credit_reward_calls"] == nodes * 3 * 2
    assert counter.env_step == group.env_step  # the joint actions taken are the same
    assert c_metrics["train/reward_mean"] == g_metrics["train/reward_mean"]  # same samples, other credit


def test_every_step_measures_each_agent_s_credit_and_reports_it_in_the_transcripts() -> None:
    trainer = make_trainer(tiny_team(), fast_config(num_generations=2, num_turns=2, credit_samples=3,
                                                transcripts_per_step=1, max_steps=1))
    metrics, episodes = trainer.train_step()
    assert {"agent/agent_0/credit", "agent/agent_1/credit"} <= set(metrics)
    assert metrics["perf/credit_reward_calls"] == 3 * 2  # 3 joint actions x 2 agents
    assert all(turn.credit is not None for turn in episodes[0].turns)  # the reported branch is probed first
    off = make_trainer(tiny_team(), fast_config(credit_samples=0, transcripts_per_step=1, max_steps=1))
    off_metrics, off_episodes = off.train_step()
    assert "agent/agent_0/credit" not in off_metrics
    assert all(turn.credit is None for turn in off_episodes[0].turns)


def test_turn_group_trains_a_two_turntiny_team() -> None:
    before = [p.detach().clone() for p in tiny_team()[0][0].parameters()]
    trainer = make_trainer(tiny_team(), fast_config(num_turns=2, credit_assignment="turn_group", max_steps=1))
    trainer.train_step()
    after = list(trainer.agents[0].model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_meaningless_combinations_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="a team of one agent has no partners"):
        m, t = build_tiny_model("llama", "xs", seed=0)
        make_trainer(([m], [t]), fast_config(credit_assignment="counterfactual"),
                     reward_func=lambda c: [float(len(c[0]))])
    with pytest.raises(ValueError, match="turn_order 'sequential'"):
        MAGRPOConfig(credit_assignment="counterfactual", turn_order="sequential")
    with pytest.raises(ValueError, match="num_turns 1 there is one node per item"):
        MAGRPOConfig(credit_assignment="turn_group", num_turns=1)
    agents = [{"name": "a"}, {"name": "b"}]
    with pytest.raises(ConfigError, match="mareinforce"):
        parse_run_config({"agents": agents, "trainer": {"algorithm": "mareinforce",
                                                        "credit_assignment": "counterfactual"}})
    with pytest.raises(ConfigError, match="a team of one agent"):
        parse_run_config({"agents": agents[:1], "trainer": {"credit_assignment": "counterfactual"}})
    config = parse_run_config({"agents": agents, "trainer": {"algorithm": "marloo",
                                                             "credit_assignment": "counterfactual"}})
    assert config.trainer.credit_assignment == "counterfactual"


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["counterfactual", "turn_group"])
def test_resume_with_each_estimator_is_exact(tmp_path, estimator) -> None:
    config = dict(max_steps=4, num_turns=2, checkpoint_interval=2, credit_assignment=estimator, credit_samples=2)
    full_sink = MemorySink()
    full = make_trainer(tiny_team(), fast_config(**config), sink=full_sink, output_dir=tmp_path / "full")
    full.train()
    first = make_trainer(tiny_team(), fast_config(**config), sink=MemorySink(stop_after_steps=2),
                         output_dir=tmp_path / "part")
    assert first.train().status == "stopped"
    resumed_sink = MemorySink()
    resumed = make_trainer(tiny_team(), fast_config(**config), sink=resumed_sink, output_dir=tmp_path / "part")
    resumed.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / "checkpoint-2")
    for a, b in zip(full.agents, resumed.agents, strict=True):
        for (name, p), q in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
            assert torch.equal(p, q), name
    keys = ("train/reward_mean", "agent/agent_0/credit", "agent/agent_1/loss")
    assert [[s.metrics[k] for k in keys] for s in full_sink.steps[2:]] == [
        [s.metrics[k] for k in keys] for s in resumed_sink.steps]
