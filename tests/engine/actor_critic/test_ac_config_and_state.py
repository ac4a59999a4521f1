"""Config names/defaults (CoMLRL's), validation messages, bad rewards, stop, checkpoint and resume."""

from __future__ import annotations

import pytest
import torch

from engine.actor_critic import IACConfig, MAACConfig
from engine.rewards.team_reward import RewardError
from engine.sinks import MemorySink
from tests.engine.actor_critic.ac_helpers import ac_config, make_ac


def test_defaults_follow_comlrl() -> None:
    iac = IACConfig()
    assert (iac.agent_learning_rate, iac.critic_learning_rate, iac.rollout_buffer_size, iac.value_clip_range,
            iac.value_loss_coef, iac.num_train_epochs, iac.num_generations, iac.num_turns, iac.critic_type,
            iac.use_separate_critic, iac.top_k, iac.discount, iac.logging_steps) == \
        (5e-6, 5e-6, 8, 0.2, 0.6, 40, 1, 2, "v", True, None, 1.0, 1)
    maac = MAACConfig()
    assert not hasattr(maac, "use_separate_critic") and maac.value_clip_range is None
    assert maac.effective_train_batch_size == 8 and IACConfig(critic_learning_rate=None).effective_critic_learning_rate == 5e-6


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"critic_type": "x"}, "critic_type: must be 'v'"),
    ({"discount": 2.0}, "discount: Input should be less than or equal to 1"),
    ({"value_clip_range": 0.0}, "value_clip_range: Input should be greater than 0"),
    ({"num_generations": 0}, "num_generations: Input should be greater than or equal to 1"),
    ({"parallel_training": "mp"}, "agent_devices: parallel_training='mp'"),
])
def test_bad_values_name_the_field(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        IACConfig(**kwargs)


def test_reward_with_the_wrong_count_names_the_function(team) -> None:
    def three(c1, c2):
        return [1.0, 2.0, 3.0]

    trainer = make_ac("iac", team, ac_config("iac"), reward_func=three)
    with pytest.raises(RewardError, match="returned 3 values for one joint action; return 1 team reward or 2"):
        trainer.train()


def test_stop_checkpoint_and_resume_restore_critics_exactly(team, tmp_path) -> None:
    sink = MemorySink(stop_after_steps=1)
    trainer = make_ac("iac", team, ac_config("iac", max_steps=3), output_dir=tmp_path)
    result = trainer.train(sink=sink)
    assert result.status == "stopped" and result.step == 1 and sink.finished == ["stopped"]
    assert sink.checkpoints and sink.checkpoints[-1][0] == 1
    saved_critic = {k: v.clone() for k, v in trainer.critics[1].state_dict().items()}
    from engine.models.tiny import build_tiny_model

    fresh_team = ([build_tiny_model("llama", "xs", seed=0)[0], build_tiny_model("qwen2", "xs", seed=1)[0]], team[1])
    resumed = make_ac("iac", fresh_team, ac_config("iac", max_steps=3))
    resumed.load_checkpoint(result.last_checkpoint)
    assert resumed.step == 1
    assert all(torch.equal(saved_critic[k], v) for k, v in resumed.critics[1].state_dict().items())
    assert all(torch.equal(a, b) for a, b in zip(team[0][0].state_dict().values(),
                                                 fresh_team[0][0].state_dict().values(), strict=True))
    final = resumed.train(sink=MemorySink())
    assert final.status == "completed" and final.step == 3


def test_checkpoint_of_another_critic_setup_is_refused(team, tmp_path) -> None:
    trainer = make_ac("iac", team, ac_config("iac", max_steps=1))
    path = trainer.save_checkpoint(tmp_path / "checkpoint-0")
    shared = make_ac("iac", team, ac_config("iac", use_separate_critic=False))
    with pytest.raises(ValueError, match="critics differ"):
        shared.load_checkpoint(path)


def test_max_steps_trains_exactly_that_many_steps_cycling_the_data(team) -> None:
    # 4 items, 2 per update: one epoch is 2 steps; max_steps=3 cycles the data as MAGRPO does
    trainer = make_ac("iac", team, ac_config("iac", max_steps=3, num_train_epochs=1, max_new_tokens=2))
    assert trainer.steps_per_epoch == 2 and trainer.total_steps == 3
    result = trainer.train(sink=MemorySink())
    assert result.status == "completed" and result.step == 3
