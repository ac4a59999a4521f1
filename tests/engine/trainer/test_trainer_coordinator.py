"""Driving the trainer step by step from outside (what a coordinator of several trainers does),
and chat-formatted prompts through the tokenizer's template."""

from __future__ import annotations

import math

from tests.engine.trainer.trainer_helpers import DATA, changed, fast_config, make_trainer, snapshot


def test_rollout_then_update_without_train(team) -> None:
    trainer = make_trainer(team, fast_config(num_turns=2, num_generations=2))
    rollout = trainer.rollout(DATA[:2], [4, 5])
    assert [n.item_index for n in rollout.roots] == [4, 5]
    assert rollout.env_steps == 2 * (2 + 4) and rollout.num_tokens > 0
    assert all(len(n.returns) == len(n.rewards) for n in rollout.nodes)
    before = [snapshot(m) for m in team[0]]
    metrics = trainer.update([rollout])
    assert math.isfinite(metrics["agent/agent_0/loss"]) and math.isfinite(metrics["agent/agent_1/grad_norm"])
    assert all(changed(b, m) for b, m in zip(before, team[0], strict=True))
    node = rollout.roots[0]
    assert len(node.agents[0].advantages) == 2 and abs(sum(node.agents[0].advantages)) < 1e-6


def test_items_for_step_covers_each_epoch_once(team) -> None:
    trainer = make_trainer(team, fast_config(shuffle=True, num_train_epochs=2, max_steps=None))
    assert trainer.steps_per_epoch == 3 and trainer.total_steps == 6
    epoch_0 = [i for s in range(3) for i in trainer.items_for_step(s)]
    epoch_1 = [i for s in range(3, 6) for i in trainer.items_for_step(s)]
    assert sorted(epoch_0) == sorted(epoch_1) == list(range(6))
    assert epoch_0 != epoch_1  # reshuffled per epoch (seeded)


def test_chat_formatters_use_the_template_and_system_prompts(team) -> None:
    seen = []

    def reward(c1, c2, prompts=None):
        seen.append(prompts)
        return [0.0]

    def chat(item):
        return [{"role": "user", "content": item["prompt"]}]

    trainer = make_trainer(team, fast_config(max_steps=1), formatters=[chat, lambda item: "plain " + item["prompt"]],
                           system_prompts=["You plan.", None], reward_func=reward)
    trainer.train()
    first_agent_prompt, second_agent_prompt = seen[0][0][0], seen[0][1][0]
    assert first_agent_prompt.startswith("<|im_start|>system\nYou plan.<|im_end|>")
    assert first_agent_prompt.endswith("<|im_start|>assistant\n")
    assert second_agent_prompt == "plain Count to 0:"


def test_external_prompt_passthrough_skips_the_formatters(team) -> None:
    def fmt(item, external_prompts=None):
        return "FORMATTED " + (external_prompts or item["prompt"])

    for passthrough, expected in ((True, "next turn"), (False, "FORMATTED next turn")):
        trainer = make_trainer(team, fast_config(num_turns=2, external_prompt_passthrough=passthrough),
                               formatters=fmt, external_transition=lambda **kw: ["next turn", "next turn"])
        rollout = trainer.rollout(DATA[:1])
        child = rollout.roots[0].children[0]
        assert child.agents[0].prompts[0] == expected
        assert rollout.roots[0].agents[0].prompts[0] == "FORMATTED Count to 0:"


def test_sequential_turns_with_items_per_step_and_evaluation(team) -> None:
    trainer = make_trainer(team, fast_config(num_turns=2, turn_order="sequential", items_per_step=2, max_steps=1),
                           eval_dataset=DATA[:2])
    metrics, episodes = trainer.train_step()
    assert trainer.env_step == 2 * (2 + 4)  # two items per rollout, aligned K=2, two turns
    assert "[agent_0]" in episodes[0].turns[1].prompt
    assert "eval/turn_2/reward_mean" in trainer.evaluate()


def test_unscored_rollout_then_credit_then_update_advancing_the_step(team) -> None:
    import pytest

    calls = []

    def reward(c1, c2):
        calls.append(len(c1))
        return [0.0] * len(c1)

    trainer = make_trainer(team, fast_config(num_generations=2, discount=0.5), reward_func=reward)
    rollout = trainer.rollout(DATA[:2], score=False)
    assert calls == [] and all(n.rewards == [] for n in rollout.nodes)
    with pytest.raises(ValueError, match=r"needs scored rollouts.*credit\(rollout, rewards\)"):
        trainer.update([rollout])
    with pytest.raises(ValueError, match="got rewards for 1 items, the rollout has 2"):
        trainer.credit(rollout, [[1.0, 0.0]])
    with pytest.raises(ValueError, match="item 1 has 2 joint actions, got 3 rewards"):
        trainer.credit(rollout, [[1.0, 0.0], [1.0, 0.0, 2.0]])
    trainer.credit(rollout, [[1.0, 0.0], [0.5, 0.25]], [{"style": [1.0, 0.0]}, {"style": [0.0, 1.0]}])
    assert rollout.roots[1].rewards == [0.5, 0.25] and rollout.roots[1].returns == [0.5, 0.25]
    assert rollout.roots[0].reward_terms == {"style": [1.0, 0.0]}
    before = [snapshot(m) for m in team[0]]
    trainer.update([rollout], advance_step=True)
    assert trainer.step == 1 and calls == []
    assert all(changed(b, m) for b, m in zip(before, team[0], strict=True))
    trainer.update([rollout])
    assert trainer.step == 1  # without advance_step the counter is the caller's


def test_unscored_rollouts_cover_one_turn(team) -> None:
    import pytest

    trainer = make_trainer(team, fast_config(num_turns=2, num_generations=2))
    with pytest.raises(ValueError, match="without scoring covers one turn"):
        trainer.rollout(DATA[:1], score=False)
    scored = trainer.rollout(DATA[:1])
    with pytest.raises(ValueError, match="single-turn rollouts"):
        trainer.credit(scored, [[0.0] * len(scored.roots[0].joint_actions)])
