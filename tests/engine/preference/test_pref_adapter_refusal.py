"""A centralized_adapter is read only by a centralized team's config; any other config refuses it by name."""

import pytest

from engine.preference.joint_policy import unread_adapter_problem
from engine.schema.configs import MAGRPOConfig
from engine.schema.preference_configs import MADPOConfig, MARLHFConfig


@pytest.mark.parametrize("config", [MADPOConfig(), MARLHFConfig(), MAGRPOConfig()])
def test_an_adapter_for_a_decentralized_config_is_refused(config):
    with pytest.raises(ValueError, match="^centralized_adapter: "):
        unread_adapter_problem(config, adapter=object())


@pytest.mark.parametrize("config_class", [MADPOConfig, MARLHFConfig])
def test_a_centralized_config_reads_the_adapter(config_class):
    assert unread_adapter_problem(config_class(collaboration_mode="centralized"), adapter=object()) is None
    assert unread_adapter_problem(config_class(), adapter=None) is None
