"""A system of two tiny trainers: alternating updates (only the scheduled trainer's weights move),
per-trainer and system metrics through one sink, stop, checkpoint of the whole system and resume."""

from __future__ import annotations

import math

import pytest
import torch

from engine import MAGRPOConfig, MAGRPOTrainer
from engine.models.tiny import build_tiny_model
from engine.sinks import MemorySink
from engine.systems import Alternating, EveryK, System, deferred_reward

DATA = [{"prompt": f"Count to {i}:"} for i in range(4)]


def team_reward(c1, c2):
    """Longer second answers and first answers near 5 characters score higher (varies per sample)."""
    return [len(c2[0]) / 10.0 - abs(len(c1[0]) - 5) / 10.0]


def _trainer(arch: str, seed: int, name: str) -> MAGRPOTrainer:
    model, tok = build_tiny_model(arch, "xs", seed=seed)
    cfg = MAGRPOConfig(num_turns=1, num_generations=3, max_new_tokens=6, agent_learning_rate=1e-3,
                       eval_interval=0, top_k=20)
    return MAGRPOTrainer(agents=[model], tokenizer=[tok], train_dataset=DATA, reward_func=deferred_reward,
                         args=cfg, agent_names=[name])


def _system(**kwargs) -> System:
    trainers = {"planner": _trainer("llama", 0, "plan"), "writer": _trainer("qwen2", 1, "write")}
    kwargs.setdefault("schedule", Alternating())
    kwargs.setdefault("rounds", 4)
    return System(trainers, reward_func=team_reward, train_dataset=DATA, **kwargs)


def _weights(system: System) -> dict[str, dict[str, torch.Tensor]]:
    return {name: {k: v.detach().clone() for k, v in t.agents[0].model.state_dict().items()}
            for name, t in system.trainers.items()}


def _moved(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> bool:
    return any(not torch.equal(before[k], after[k]) for k in before)


def test_alternating_changes_only_the_scheduled_trainer_each_round() -> None:
    system = _system()
    sink = MemorySink()
    sink.start(system.total_rounds, {})
    expected = ["planner", "writer", "planner", "writer"]
    for name in expected:
        before = _weights(system)
        metrics, episodes = system.step()
        after = _weights(system)
        moved = {n for n in system.names if _moved(before[n], after[n])}
        assert moved == {name}, (system.round, moved)
        assert metrics[f"trainer/{name}/updated"] == 1.0
        other = next(n for n in system.names if n != name)
        assert metrics[f"trainer/{other}/updated"] == 0.0
        assert not [k for k in metrics if k.startswith(f"trainer/{other}/agent/")]
        agent = "plan" if name == "planner" else "write"
        assert math.isfinite(metrics[f"trainer/{name}/agent/{agent}/loss"])
        # one joint episode holds both trainers' agents, scored with one team reward
        assert [t.agent_name for t in episodes[0].turns] == ["planner/plan", "writer/write"]
        assert episodes[0].turns[0].reward == episodes[0].turns[1].reward
    assert system.trainers["planner"].step == 2 and system.trainers["writer"].step == 2
    assert system.env_step == 4 * 3


def test_every_k_and_the_sink_get_per_trainer_and_system_series(tmp_path) -> None:
    system = _system(schedule=EveryK(every={"writer": 2}), output_dir=tmp_path)
    # each trainer's LR schedule spans the updates the schedule gives it
    assert system.trainers["planner"].total_steps == 4 and system.trainers["writer"].total_steps == 2
    sink = MemorySink()
    result = system.train(sink=sink)
    assert result.status == "completed" and result.step == 4 and sink.finished == ["completed"]
    assert [s.step for s in sink.steps] == [1, 2, 3, 4] and [s.env_step for s in sink.steps] == [3, 6, 9, 12]
    assert [s.metrics["trainer/writer/updated"] for s in sink.steps] == [0.0, 1.0, 0.0, 1.0]
    assert [s.metrics["trainer/planner/updates"] for s in sink.steps] == [1.0, 2.0, 3.0, 4.0]
    for step in sink.steps:
        assert math.isfinite(step.metrics["system/reward_mean"])
        assert step.metrics["system/reward_mean"] == step.metrics["train/reward_mean"]
    assert sink.checkpoints == [(4, str(tmp_path / "checkpoints" / "checkpoint-4"))]


def test_stop_then_resume_continues_the_whole_system(tmp_path) -> None:
    system = _system()
    stopped = system.train(sink=MemorySink(stop_after_steps=1), checkpoint_dir=tmp_path)
    assert stopped.status == "stopped" and stopped.step == 1
    saved = _weights(system)
    resumed = _system()
    resumed.load_checkpoint(stopped.last_checkpoint)
    assert resumed.round == 1 and resumed.env_step == 3 and resumed.trainers["planner"].step == 1
    restored = _weights(resumed)
    assert not any(_moved(saved[n], restored[n]) for n in saved)
    sink = MemorySink()
    final = resumed.train(sink=sink, checkpoint_dir=tmp_path)
    assert final.status == "completed" and [s.step for s in sink.steps] == [2, 3, 4]
    assert sink.steps[0].metrics["trainer/writer/updated"] == 1.0  # round 2 belongs to the writer


def test_a_sub_team_trainer_and_a_single_agent_trainer_score_one_joint_outcome() -> None:
    seen = []

    def three_agent_reward(a, b, c):
        seen.append((a[0], b[0], c[0]))
        return [float(len(a[0]) + len(b[0]) - len(c[0]))]

    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    m3, t3 = build_tiny_model("llama", "xs", seed=2)
    cfg = MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=5, agent_learning_rate=1e-3, eval_interval=0)
    pair = MAGRPOTrainer(agents=[m1, m2], tokenizer=[t1, t2], train_dataset=DATA, reward_func=deferred_reward,
                         args=cfg, agent_names=["a", "b"])
    solo = MAGRPOTrainer(agents=[m3], tokenizer=[t3], train_dataset=DATA, reward_func=deferred_reward, args=cfg,
                         agent_names=["c"])
    system = System({"pair": pair, "solo": solo}, reward_func=three_agent_reward, train_dataset=DATA,
                    schedule=EveryK(), rounds=1)
    metrics, episodes = system.step()
    assert len(seen) == 2  # K = 2 joint actions, each with all three agents' replies
    assert {"trainer/pair/agent/a/loss", "trainer/pair/agent/b/loss", "trainer/solo/agent/c/loss"} <= set(metrics)
    assert [t.agent_name for t in episodes[0].turns] == ["pair/a", "pair/b", "solo/c"]
    expected = sum(len(a) + len(b) - len(c) for a, b, c in seen) / 2
    assert metrics["system/reward_mean"] == expected


def test_trainers_sharing_a_model_object_are_refused() -> None:
    model, tok = build_tiny_model("llama", "xs", seed=0)
    cfg = MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=4, eval_interval=0)
    one = MAGRPOTrainer(agents=[model], tokenizer=[tok], train_dataset=DATA, reward_func=deferred_reward, args=cfg)
    two = MAGRPOTrainer(agents=[model], tokenizer=[tok], train_dataset=DATA, reward_func=deferred_reward, args=cfg)
    with pytest.raises(ValueError, match="share a model object"):
        System({"one": one, "two": two}, reward_func=team_reward, train_dataset=DATA, schedule=Alternating())
