"""CoMLRL 1.4.3's MADPOConfig rules: ``train_batch_size`` resolved to ``rollout_buffer_size`` when the
config is made, ``pair_selection='all'`` only with ``preference_pairs_per_sample`` null, and no
gradient clipping by default (CoMLRL clips nothing)."""

from __future__ import annotations

import pytest

from engine import MADPOConfig
from engine.schema.preference_configs import MADPOIterConfig, MARLHFConfig, MARLHFIterConfig


def test_train_batch_size_is_resolved_as_comlrl_does() -> None:
    assert MADPOConfig().train_batch_size == 2  # CoMLRL: rollout_buffer_size's default
    assert MADPOConfig(rollout_buffer_size=5).train_batch_size == 5
    assert MADPOConfig(rollout_buffer_size=5, train_batch_size=3).train_batch_size == 3
    assert MADPOIterConfig().train_batch_size == 2 and MARLHFConfig().train_batch_size == 2


@pytest.mark.parametrize("cls", [MADPOConfig, MARLHFConfig])
def test_all_pairs_with_a_pair_limit_is_refused(cls) -> None:
    with pytest.raises(ValueError, match=r"^preference_pairs_per_sample: pair_selection='all' keeps every pair"):
        cls(pair_selection="all", preference_pairs_per_sample=4)
    with pytest.raises(ValueError, match="preference_pairs_per_sample: pair_selection='all'"):
        cls(pair_selection="all")  # the default limit (16) counts too, as in CoMLRL
    config = cls(pair_selection="all", preference_pairs_per_sample=None)
    assert (config.pair_selection, config.preference_pairs_per_sample) == ("all", None)


def test_iterative_configs_keep_the_rule() -> None:
    with pytest.raises(ValueError, match="preference_pairs_per_sample: pair_selection='all'"):
        MADPOIterConfig(pair_selection="all")
    with pytest.raises(ValueError, match="preference_pairs_per_sample: pair_selection='all'"):
        MARLHFIterConfig(pair_selection="all")


def test_dpo_trainers_clip_no_gradient_unless_asked() -> None:
    assert MADPOConfig().max_grad_norm is None and MADPOIterConfig().max_grad_norm is None
    assert MADPOConfig(max_grad_norm=1.0).max_grad_norm == 1.0
