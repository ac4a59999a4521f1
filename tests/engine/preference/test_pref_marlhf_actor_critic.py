"""MARLHF with an actor-critic RL stage (rl_algorithm iac/maac): the constructor picks the stage, the
critics learn while the actors optimise the learned reward and evaluation keeps the task's, a run
stopped in the RL stage resumes exactly, and run configs take the critic settings."""

from __future__ import annotations

import pytest
import torch

from engine import MARLHFConfig, MARLHFTrainer
from engine.actor_critic.iac import IACTrainer
from engine.actor_critic.maac import MAACTrainer
from engine.build.run import build_trainer
from engine.preference.marlhf_actor_critic import MARLHFIACTrainer, MARLHFMAACTrainer
from engine.schema.run_config import ConfigError, parse_run_config
from engine.sinks import MemorySink
from tests.engine.preference.pref_helpers import PROMPTS, digit_share, tiny_team, weights


def _config(algorithm: str, **overrides) -> MARLHFConfig:
    values = dict(rl_algorithm=algorithm, num_generations=1, preference_num_candidates=4, preference_pairs_per_sample=2,
                  max_new_tokens=6, items_per_step=4, rollout_buffer_size=2, num_train_epochs=2, eval_interval=0,
                  logging_steps=1, agent_learning_rate=1e-3, critic_learning_rate=1e-3, reward_num_train_epochs=1,
                  checkpoint_interval=0, seed=0)
    values.update(overrides)
    return MARLHFConfig(**values)


def _trainer(config: MARLHFConfig, **kwargs):
    models, tokenizers = tiny_team()
    return MARLHFTrainer(agents=models, tokenizer=tokenizers, train_dataset=PROMPTS, eval_dataset=PROMPTS[:2],
                         reward_func=digit_share, args=config, **kwargs)


@pytest.mark.parametrize(("algorithm", "cls", "base"), [("iac", MARLHFIACTrainer, IACTrainer),
                                                        ("maac", MARLHFMAACTrainer, MAACTrainer)])
def test_the_actor_critic_stage_trains_critics_on_the_learned_reward(algorithm, cls, base) -> None:
    sink = MemorySink()
    trainer = _trainer(_config(algorithm), sink=sink)
    assert type(trainer) is cls and isinstance(trainer, base)
    critics_before = [{k: v.clone() for k, v in c.state_dict().items()} for c in trainer.critics]
    agents_before = weights(trainer)
    result = trainer.train()
    assert result.step == trainer.total_steps >= 2
    first = sink.steps[0].metrics
    assert first["pairs/total"] == len(trainer.collector.pairs) > 0 and "reward_model/loss" in first
    assert any(k.startswith("critic/") for k in first)
    assert any(not torch.equal(critics_before[0][k], v) for k, v in trainer.critics[0].state_dict().items())
    assert any(not torch.equal(agents_before[0][k], v) for k, v in weights(trainer)[0].items())
    # the RL stage's rewards are the reward model's scores, evaluation's the task's
    chain = trainer.rollout([dict(PROMPTS[0])], [0]).chains[0]
    texts = [chain.turns[0][i].text for i in range(2)]
    prompts = [[chain.turns[0][i].prompt] for i in range(2)]
    learned = trainer.learned_reward.score([[t] for t in texts], [PROMPTS[0]], prompts)[0][0]
    assert chain.turns[0][0].reward == pytest.approx(learned, abs=1e-5)
    assert trainer.eval_rewards.team.reward_func is digit_share


def test_a_run_stopped_in_the_rl_stage_resumes_exactly(tmp_path) -> None:
    full = _trainer(_config("iac"), sink=MemorySink(), output_dir=tmp_path / "full")
    full.train()
    part = _trainer(_config("iac"), sink=MemorySink(stop_after_steps=1), output_dir=tmp_path / "part")
    assert part.train().status == "stopped"
    resumed = _trainer(_config("iac"), sink=MemorySink())
    resumed.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / "checkpoint-1")
    for a, b in zip(weights(full), weights(resumed), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    for a, b in zip(full.critics, resumed.critics, strict=True):
        assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())


def test_settings_of_the_other_stage_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="value_loss_coef: only rl_algorithm iac/maac has critics"):
        MARLHFConfig(value_loss_coef=0.3)
    with pytest.raises(ValueError, match="num_generations: must be >= 2 for rl_algorithm 'magrpo'"):
        MARLHFConfig(num_generations=1)
    with pytest.raises(ValueError, match="collaboration_mode: a centralized MARLHF runs a MAGRPO-family RL stage"):
        MARLHFConfig(rl_algorithm="iac", collaboration_mode="centralized")
    from engine import MARLHFIterConfig

    with pytest.raises(ValueError, match="rl_algorithm: MARLHFIter runs a MAGRPO-family RL stage"):
        MARLHFIterConfig(rl_algorithm="maac")


def test_a_run_config_takes_the_critic_settings_for_an_actor_critic_stage() -> None:
    base = {"agents": [{"name": "a", "model": "builtin:tiny-llama-xs"}, {"name": "b", "model": "builtin:tiny-qwen2-xs"}],
            "task": {"name": "quickstart", "params": {"num_items": 4, "eval_items": 2}}}
    trainer = {"algorithm": "marlhf", "rl_algorithm": "maac", "num_generations": 1, "preference_num_candidates": 4,
               "max_new_tokens": 6, "actor_critic": {"critic_learning_rate": 1e-4, "critic_type": "q"}}
    built = build_trainer(parse_run_config({**base, "trainer": trainer}), output_dir=None)
    assert type(built) is MARLHFMAACTrainer and (built.args.critic_learning_rate, built.args.critic_type) == (1e-4, "q")
    with pytest.raises(ConfigError, match="trainer.actor_critic: applies to iac/maac .* not to marlhf with "
                                          "rl_algorithm 'magrpo'"):
        parse_run_config({**base, "trainer": {**trainer, "rl_algorithm": "magrpo", "num_generations": 2}})


def test_a_subclass_or_a_pass_at_k_check_cannot_drop_the_actor_critic_stage() -> None:
    class Custom(MARLHFTrainer):
        pass

    with pytest.raises(ValueError, match="rl_algorithm: Custom runs a MAGRPO-family stage"):
        _trainer_of(Custom, _config("iac"))
    with pytest.raises(ValueError, match="eval_check: pass@k is reported by MAGRPO-family stages"):
        _trainer(_config("iac"), eval_check=lambda item, answers: True)


def _trainer_of(cls, config: MARLHFConfig):
    models, tokenizers = tiny_team()
    return cls(agents=models, tokenizer=tokenizers, train_dataset=PROMPTS, reward_func=digit_share, args=config)
