"""MAGRPOConfig: CoMLRL's names and defaults, our extras, presets, and errors that name the field."""

from __future__ import annotations

import pytest

from engine import MAGRPOConfig, MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig

# CoMLRL 1.4.3's MAGRPOConfig table (reference/comlrl.md 1.1), except early_termination_threshold and
# parallel_training (CoMLRL's "none" is accepted; the default "auto" overlaps agents only when exact)
COMLRL_DEFAULTS = {
    "num_train_epochs": 20, "agent_learning_rate": 5e-6, "logging_steps": 50, "num_agents": 2,
    "agent_devices": None, "num_generations": 4, "max_new_tokens": 256,
    "temperature": 0.6, "top_p": 0.6, "top_k": 50, "num_turns": 2, "discount": 1.0, "joint_mode": "aligned",
    "external_prompt_passthrough": False, "eval_interval": 16, "eval_num_samples": 4, "eval_batch_size": 1,
    "rollout_buffer_size": 2, "train_batch_size": None, "advantage_normalization": True, "advantage_mode": "mean",
    "reference_kl_enabled": False, "reference_kl_coef": 0.1, "reference_devices": None,
}


def test_comlrl_fields_and_defaults() -> None:
    cfg = MAGRPOConfig()
    for name, default in COMLRL_DEFAULTS.items():
        assert getattr(cfg, name) == default, name
    assert cfg.early_termination_threshold is None  # off by default (CoMLRL: -0.2, sign-dependent)
    assert cfg.parallel_training == "auto"  # CoMLRL: "none"; both spellings of CoMLRL's are accepted
    assert MAGRPOConfig(parallel_training="none").parallel_training == "none"
    assert cfg.effective_train_batch_size == 2


def test_extras_exist_with_documented_defaults() -> None:
    cfg = MAGRPOConfig()
    assert (cfg.turn_order, cfg.loss_type, cfg.clip_epsilon, cfg.num_inner_epochs) == ("simultaneous", "seq_sum", None, 1)
    assert (cfg.reference_kl_mode, cfg.lr_scheduler, cfg.items_per_step) == ("reward", "constant", None)
    assert cfg.seed is None  # not given: the run continues torch's global RNG, as CoMLRL's does
    assert cfg.credit_samples == 0  # credit probes call the reward again: only when asked for
    assert cfg.fast_decode is True
    assert "checkpoint_interval" in cfg.to_dict() and "_forced_mode" not in cfg.to_dict()


def test_aliases_are_normalised() -> None:
    assert MAGRPOConfig(joint_mode="crossed").joint_mode == "cross"
    assert MAGRPOConfig(joint_mode="align").joint_mode == "aligned"
    assert MAGRPOConfig(parallel_training="null").parallel_training == "none"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_generations": 1}, "num_generations"),
        ({"top_p": 1.5}, "top_p"),
        ({"discount": 2.0}, "discount"),
        ({"joint_mode": "diagonal"}, "joint_mode"),
        ({"advantage_mode": "median"}, "advantage_mode"),
        ({"loss_type": "mean"}, "loss_type"),
        ({"num_inner_epochs": 2}, "num_inner_epochs"),
        ({"parallel_training": "mp"}, "agent_devices"),
        ({"turn_order": "sequential", "joint_mode": "cross"}, "turn_order"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"clip_epsilon": -0.1}, "clip_epsilon"),
        ({"agent_learning_rate": 0.0}, "agent_learning_rate"),
        ({"fast_decode": "yes"}, "fast_decode"),
    ],
)
def test_invalid_values_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        MAGRPOConfig(**kwargs)


def test_presets_force_their_advantage_mode() -> None:
    assert MAREINFORCEConfig().advantage_mode == "raw"
    assert MAReMaxConfig().advantage_mode == "max"
    assert MARLOOConfig(num_turns=1).advantage_mode == "rloo"
    assert MAGRPOConfig(advantage_mode="max").advantage_mode == "max"
