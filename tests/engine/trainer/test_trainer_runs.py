"""End-to-end training runs on tiny real models: single-turn, two-turn (aligned and cross),
sequential turns, early termination, discounting, env_step counting and what reaches the sink."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from engine import MAGRPOTrainer
from engine.models.tiny import build_tiny_model
from engine.rewards.team_reward import RewardError
from engine.sinks import MemorySink
from tests.engine.trainer.trainer_helpers import DATA, changed, fast_config, make_trainer, snapshot

AGENT_KEYS = ("loss", "grad_norm", "entropy", "response_len")


def test_single_turn_run_reports_metrics_transcripts_and_changes_weights(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(num_generations=3), sink=sink, agent_names=["writer", "editor"])
    before = [snapshot(m) for m in team[0]]
    result = trainer.train()
    assert result.status == "completed" and result.step == 2
    assert sink.finished == ["completed"] and sink.started[0][0] == 2
    # rollout_buffer_size 2 with one node per item -> 2 items per step, K=3 joint actions each
    assert [s.env_step for s in sink.steps] == [6, 12]
    metrics = sink.steps[-1].metrics
    for name in ("writer", "editor"):
        for key in AGENT_KEYS:
            value = metrics[f"agent/{name}/{key}"]
            assert math.isfinite(value), key
    for key in ("train/reward_mean", "turn_1/reward_mean", "turn_1/expected_return", "perf/step_time_s",
                "perf/generate_s", "perf/tokens_per_s"):
        assert key in metrics
    assert metrics["perf/tokens_per_s"] > 0
    assert all(changed(b, m) for b, m in zip(before, team[0], strict=True))
    episode = sink.steps[0].episodes[0]
    assert len(sink.steps[0].episodes) == 2
    assert [(t.turn, t.agent_name) for t in episode.turns] == [(1, "writer"), (1, "editor")]
    assert episode.split == "train" and episode.item_index in (0, 1)
    assert episode.turns[0].prompt == f"Count to {episode.item_index}:"
    assert episode.turns[0].reward == episode.turns[1].reward == episode.turns[0].ret


def test_two_turn_aligned_tree_counts_env_steps_and_passes_histories(team) -> None:
    calls = []

    def transition(prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent):
        calls.append((prompt, list(agent_completions), num_agents, prompt_history_per_agent,
                      response_history_per_agent))
        return [f"{prompt} again {i}" for i in range(num_agents)]

    sink = MemorySink()
    trainer = make_trainer(team, fast_config(num_turns=2, num_generations=2, max_steps=1), sink=sink,
                           external_transition=transition)
    before = [snapshot(m) for m in team[0]]
    trainer.train()
    # one item per step (a tree has 1 + K = 3 nodes >= buffer 2): K + K*K joint actions
    assert sink.steps[0].env_step == 2 + 4
    assert len(calls) == 2  # one call per turn-1 joint action
    prompt, completions, n, prompt_hist, response_hist = calls[0]
    assert prompt == "Count to 0:" and n == 2 and len(completions) == 2
    assert [len(h) for h in prompt_hist] == [1, 1] and [len(h) for h in response_hist] == [1, 1]
    assert response_hist[0][0] == completions[0]
    metrics = sink.steps[0].metrics
    assert "turn_2/reward_mean" in metrics and "turn_2/expected_return" in metrics
    assert all(changed(b, m) for b, m in zip(before, team[0], strict=True))
    episode = sink.steps[0].episodes[0]
    assert [t.turn for t in episode.turns] == [1, 1, 2, 2]
    assert episode.turns[2].prompt.endswith("again 0") and episode.turns[3].prompt.endswith("again 1")


def test_two_turn_cross_tree_has_k_to_the_n_joint_actions(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(num_turns=2, num_generations=2, joint_mode="cross", max_steps=1),
                           sink=sink)
    trainer.train()
    assert sink.steps[0].env_step == 4 + 16  # K^N at the root, then K^N children with K^N each
    assert math.isfinite(sink.steps[0].metrics["agent/agent_0/loss"])


def test_discount_is_honoured_in_returns(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(num_turns=2, discount=0.5, max_steps=1), sink=sink,
                           reward_func=lambda c1, c2: [1.0])
    trainer.train()
    turns = sink.steps[0].episodes[0].turns
    assert [t.ret for t in turns] == [1.5, 1.5, 1.0, 1.0]
    assert sink.steps[0].metrics["turn_1/expected_return"] == 1.5


def test_early_termination_stops_expanding_good_branches(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(num_turns=2, early_termination_threshold=0.5, max_steps=1,
                                             rollout_buffer_size=1), sink=sink, reward_func=lambda c1, c2: [1.0])
    trainer.train()
    assert sink.steps[0].env_step == 2  # mean reward 1 > 0.5: no second turn
    assert "turn_2/reward_mean" not in sink.steps[0].metrics


def test_sequential_turn_order_shows_earlier_replies(team) -> None:
    seen = []

    def reward(completions1, completions2, prompts=None):
        seen.append((completions1[0], prompts[1][0]))
        return [0.0]

    trainer = make_trainer(team, fast_config(turn_order="sequential", max_steps=1), reward_func=reward)
    trainer.train()
    assert seen
    for first_reply, second_prompt in seen:
        assert f"[agent_0]\n{first_reply}" in second_prompt


def test_single_agent_is_grpo() -> None:
    model, tok = build_tiny_model("llama", "xs", seed=3)
    sink = MemorySink()
    trainer = MAGRPOTrainer(agents=[model], tokenizer=tok, train_dataset=DATA,
                            reward_func=lambda completions: [float(len(completions[0]))],
                            args=fast_config(), sink=sink)
    assert trainer.num_agents == 1
    trainer.train()
    assert sink.steps[-1].env_step == 8 and math.isfinite(sink.steps[-1].metrics["agent/agent_0/loss"])


def test_clipping_inner_epochs_kl_and_schedule_options(team) -> None:
    sink = MemorySink()
    config = fast_config(clip_epsilon=0.2, num_inner_epochs=2, reference_kl_enabled=True, reference_kl_mode="loss",
                         loss_type="token_mean", lr_scheduler="cosine", warmup_steps=1, micro_batch_size=1,
                         gradient_checkpointing=True, per_agent_normalization=True, items_per_step=2)
    trainer = make_trainer(team, config, sink=sink)
    trainer.train()
    m = sink.steps[-1].metrics
    assert 0.0 <= m["agent/agent_0/clip_fraction"] <= 1.0
    assert m["agent/agent_0/kl"] >= 0.0 and "agent/agent_0/kl_loss" in m
    assert m["agent/agent_0/optimizer_steps"] == 2.0  # 2 inner epochs x 1 mini-batch of 2 nodes
    assert sink.steps[0].metrics["agent/agent_0/lr"] == pytest.approx(0.5e-3)  # warmup step 1 of 1


def test_kl_in_reward_lowers_values_and_reports_per_turn(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(reference_kl_enabled=True, max_steps=2), sink=sink)
    trainer.train()
    assert "turn_1/reference_kl_mean" in sink.steps[-1].metrics


def test_non_finite_reward_fails_the_step_naming_the_function(team) -> None:
    def nan_reward(c1, c2):
        return [float("nan")]

    sink = MemorySink()
    trainer = make_trainer(team, fast_config(), reward_func=nan_reward, sink=sink)
    with pytest.raises(RewardError, match="nan_reward"):
        trainer.train()
    assert sink.finished == ["failed"]


def test_non_finite_loss_fails_loudly_naming_the_agent(team) -> None:
    trainer = make_trainer(team, fast_config(advantage_mode="raw", advantage_normalization=False),
                           reward_func=lambda c1, c2: [1e38], agent_names=["alice", "bob"])
    with pytest.raises(FloatingPointError, match="agent 'alice'"):
        trainer.train()


def test_stop_request_checkpoints_and_returns_stopped(team, tmp_path) -> None:
    sink = MemorySink(stop_after_steps=1)
    trainer = make_trainer(team, fast_config(max_steps=5), sink=sink, output_dir=tmp_path)
    result = trainer.train()
    assert result.status == "stopped" and result.step == 1
    assert sink.finished == ["stopped"]
    assert sink.checkpoints == [(1, str(tmp_path / "checkpoints" / "checkpoint-1"))]
    assert (tmp_path / "checkpoints" / "checkpoint-1" / "trainer_state.pt").is_file()


def test_parallel_mp_runs_agents_in_threads_on_cpu(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(parallel_training="mp", agent_devices=["cpu", "cpu"]), sink=sink)
    try:
        before = [snapshot(m) for m in team[0]]
        trainer.train()
    finally:
        trainer.close()
    assert all(changed(b, m) for b, m in zip(before, team[0], strict=True))
    assert sink.steps[-1].env_step == 8  # 2 steps x 2 items x K=2


def test_multi_turn_without_transition_is_rejected(team) -> None:
    with pytest.raises(ValueError, match="external_transition"):
        MAGRPOTrainer(agents=team[0], tokenizer=team[1], train_dataset=DATA, reward_func=lambda a, b: [0.0],
                      args=fast_config(num_turns=2))


def test_model_object_needs_agents_list(team) -> None:
    with pytest.raises(ValueError, match="agents="):
        MAGRPOTrainer(agent_model=team[0][0], tokenizer=team[1][0], train_dataset=DATA,
                      reward_func=lambda a, b: [0.0], args=fast_config())


def test_reward_terms_are_logged_per_term(team) -> None:
    class Terms:
        term_names = ["length", "bonus"]

        def score(self, agent_completions, batch_items, prompts):
            length = [float(len(a) + len(b)) for a, b in zip(*agent_completions, strict=True)]
            bonus = [1.0] * len(length)
            return [x + 1.0 for x in length], {"length": length, "bonus": bonus}

    sink = MemorySink()
    make_trainer(team, fast_config(max_steps=1), reward_func=Terms(), sink=sink).train()
    m = sink.steps[0].metrics
    assert m["reward/bonus"] == 1.0
    assert m["train/reward_mean"] == pytest.approx(m["reward/length"] + 1.0)


def test_model_config_dtype_is_applied(team) -> None:
    sink = MemorySink()
    trainer = make_trainer(team, fast_config(max_steps=1, model_config={"torch_dtype": "bfloat16"}), sink=sink)
    trainer.train()
    assert all(next(a.model.parameters()).dtype == torch.bfloat16 for a in trainer.agents)
    assert math.isfinite(sink.steps[0].metrics["agent/agent_0/loss"])


def test_wandb_config_reports_to_wandb_or_says_how_to_install(team) -> None:
    if importlib.util.find_spec("wandb") is None:
        with pytest.raises(ImportError, match="pip install wandb"):
            make_trainer(team, fast_config(), wandb_config={"project": "p"})
    else:
        trainer = make_trainer(team, fast_config(), wandb_config={"project": "p", "mode": "disabled"})
        assert type(trainer.sink).__name__ == "WandbSink"


def test_heterogeneous_architectures_and_tokenizers() -> None:
    llama, llama_tok = build_tiny_model("llama", "xs", seed=0)
    gpt2, gpt2_tok = build_tiny_model("gpt2", "s", seed=5)
    gpt2_tok.add_special_tokens({"additional_special_tokens": ["<|gpt2-only|>"]})
    gpt2.resize_token_embeddings(len(gpt2_tok))
    assert len(gpt2_tok) != len(llama_tok)
    sink = MemorySink()
    before = [snapshot(llama), snapshot(gpt2)]
    make_trainer(([llama, gpt2], [llama_tok, gpt2_tok]), fast_config(num_turns=2, max_steps=1), sink=sink).train()
    assert changed(before[0], llama) and changed(before[1], gpt2)
    assert math.isfinite(sink.steps[0].metrics["agent/agent_1/loss"])


def test_three_turns_grow_each_branch_history(team) -> None:
    lengths = []

    def transition(*, prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent):
        lengths.append((len(prompt_history_per_agent[0]), len(response_history_per_agent[1])))
        assert response_history_per_agent[0][-1] == agent_completions[0]
        return [f"turn {len(prompt_history_per_agent[0]) + 1}"] * num_agents

    trainer = make_trainer(team, fast_config(num_turns=3), external_transition=transition)
    rollout = trainer.rollout(DATA[:1])
    assert rollout.env_steps == 2 + 4 + 8
    assert sorted(set(lengths)) == [(1, 1), (2, 2)] and len(lengths) == 2 + 4
    leaf = rollout.nodes[-1]
    assert leaf.turn == 2 and leaf.agents[0].prompts[0] == "turn 3"
