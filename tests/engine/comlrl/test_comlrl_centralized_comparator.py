"""engine.comlrl's iterative preference configs tie a centralized actor to a centralized comparator,
as CoMLRL 1.4.3 does; CoopLab's trainer is handed its own spelling of the same comparator."""

from __future__ import annotations

import pytest

from engine.comlrl._configs import engine_config
from engine.comlrl.trainers.preference import MADPOIterConfig, MARLHFIterConfig
from engine.schema import preference_configs


@pytest.mark.parametrize("cls", [MADPOIterConfig, MARLHFIterConfig])
def test_a_centralized_actor_reports_a_centralized_comparator(cls) -> None:
    assert cls(agent_devices="cpu").comparator_generation_mode == "decentralized"
    config = cls(agent_devices="cpu", collaboration_mode="centralized")
    assert config.comparator_generation_mode == "centralized" and config.num_agents == 2
    explicit = cls(collaboration_mode="centralized", comparator_generation_mode="centralized")
    assert explicit.comparator_generation_mode == "centralized"
    with pytest.raises(ValueError, match="^Centralized collaboration has only actor index 0.$"):
        cls(collaboration_mode="centralized", comparator_centralized_agent_index=1)


@pytest.mark.parametrize("cls", [MADPOIterConfig, MARLHFIterConfig])
def test_the_engine_sees_its_own_spelling_of_that_comparator(cls) -> None:
    config = cls(agent_devices="cpu", collaboration_mode="centralized", num_iterations=3)
    seen = engine_config(config)
    assert type(seen) is getattr(preference_configs, cls.__name__)
    assert seen.comparator_generation_mode == "decentralized" and seen.num_iterations == 3
    assert config.comparator_generation_mode == "centralized"  # the user's object is unchanged
    decentralized = cls(agent_devices="cpu", comparator_generation_mode="centralized")
    assert engine_config(decentralized) is decentralized
