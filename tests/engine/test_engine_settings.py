"""Every trainer setting is declared once (the catalog) and every class, the schema and the docs
derive from it; the rules that tie settings together are pure functions, checked by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.schema.actor_critic_configs import ActorCriticConfig, IACConfig, MAACConfig
from engine.schema.algorithms import CONFIG_CLASSES, RUN_LEVEL, read_settings, unused_settings
from engine.schema.catalog import ALGORITHMS, CATALOG, COMLRL_ORDER, ITERATIVE, LEARNED_REWARD, PAIRS
from engine.schema.configs import MAGRPOConfig, MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig
from engine.schema.derive import class_settings
from engine.schema.preference_configs import (
    CentralizedMAGRPOConfig,
    MADPOConfig,
    MADPOIterConfig,
    MARLHFConfig,
    MARLHFIterConfig,
)
from engine.schema.rules import combination_problems, group_size_problem
from engine.schema.run_config import (
    LORA_SETTINGS,
    ActorCriticSection,
    AgentSpec,
    TrainerSpec,
    parse_run_config,
)
from engine.schema.settings_table import settings_table

ROOT = Path(__file__).resolve().parents[2]


def _fields(cls) -> dict:
    return getattr(cls, "__pydantic_fields__", None) or cls.model_fields


@pytest.mark.parametrize("cls", [TrainerSpec, ActorCriticSection, MAGRPOConfig, MARLOOConfig, IACConfig, MAACConfig,
                                 MADPOConfig, CentralizedMAGRPOConfig, MARLHFConfig,
                                 MADPOIterConfig, MARLHFIterConfig])
def test_every_field_is_the_catalogs_setting(cls) -> None:
    for name, info in _fields(cls).items():
        if name == "actor_critic":
            continue  # the typed section, itself built from the catalog
        setting = CATALOG[name]  # a field that is not in the catalog fails here
        assert info.description == setting.field.description, name
        readers = [m for m in info.metadata if m not in setting.field.metadata]
        assert [m for m in info.metadata if m in setting.field.metadata] == setting.field.metadata, name
        assert [getattr(r, "func", None) for r in readers] == ([setting.before] if setting.before else []), name


def test_every_setting_is_used_and_the_run_level_ones_are_named() -> None:
    used = set().union(*(_fields(c) for c in (TrainerSpec, ActorCriticSection, MAGRPOConfig, IACConfig, MAACConfig,
                                                     MADPOConfig, CentralizedMAGRPOConfig, MARLHFConfig,
                                                     MADPOIterConfig, AgentSpec)))
    assert set(CATALOG) <= used
    assert set(RUN_LEVEL) == {"algorithm", "device", "torch_dtype", "actor_critic"}
    assert {"clip_epsilon", "joint_mode", "turn_order", "advantage_mode"} <= set(unused_settings("iac"))
    # collaboration_mode is read by the build for every algorithm; a run config never holds an API key (only
    # its variable's name)
    preference_only = {name for name, s in CATALOG.items() if s.group == "preference"}
    assert set(unused_settings("magrpo")) == preference_only - {"comparator_api_key"}
    assert "reference_free" in preference_only and "collaboration_mode" not in unused_settings("magrpo")
    assert "comparator_api_key" not in TrainerSpec.model_fields and "comparator_api_key_env" in TrainerSpec.model_fields
    # MADPO accepts every CoMLRL MAGRPO field for ports, but the run config refuses those it never reads
    assert {"num_generations", "advantage_mode", "clip_epsilon", "reference_kl_enabled"} <= set(unused_settings("madpo"))
    assert not set(unused_settings("madpo")) & {"temperature", "train_batch_size", "dpo_beta", "joint_mode"}


def test_the_per_agent_lora_settings_are_the_catalogs() -> None:
    assert LORA_SETTINGS == ("lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")
    for name in LORA_SETTINGS:
        assert AgentSpec.model_fields[name].description == CATALOG[name].field.description
        assert AgentSpec.model_fields[name].default == CATALOG[name].default
    assert "lora_rank" not in TrainerSpec.model_fields  # per agent, not per run


def test_classes_differ_only_in_defaults_they_choose() -> None:
    assert (MAGRPOConfig().top_k, IACConfig().top_k, TrainerSpec().top_k) == (50, None, 50)
    assert (MAGRPOConfig().num_turns, TrainerSpec().num_turns) == (2, 1)
    assert (IACConfig().value_clip_range, MAACConfig().value_clip_range) == (0.2, None)
    assert (MAGRPOConfig().advantage_mode, MARLOOConfig().advantage_mode, TrainerSpec().advantage_mode) == (
        "mean", "rloo", None)


def test_one_bound_gives_the_same_error_everywhere() -> None:
    with pytest.raises(ValueError, match="^top_p: Input should be less than or equal to 1"):
        MAGRPOConfig(top_p=1.5)
    with pytest.raises(ValueError, match="^top_p: Input should be less than or equal to 1"):
        IACConfig(top_p=1.5)
    with pytest.raises(ValueError, match="trainer.top_p: Input should be less than or equal to 1"):
        parse_run_config({"agents": [{"name": "a"}], "trainer": {"top_p": 1.5}})


def test_values_are_read_the_same_way_everywhere() -> None:
    assert MAGRPOConfig(agent_devices="cuda:0").agent_devices == ["cuda:0"]
    assert TrainerSpec(joint_mode="crossed", parallel_training="null").joint_mode == "cross"
    assert IACConfig(critic_type="Q").critic_type == "q"
    config = MAGRPOConfig()
    config.seed = 7  # CoMLRL configs are mutable; assignments are validated too
    with pytest.raises(ValueError):
        config.temperature = -1.0


@pytest.mark.parametrize(("settings", "expected"), [
    ({"num_inner_epochs": 2, "clip_epsilon": None}, ["num_inner_epochs"]),
    ({"num_inner_epochs": 2, "clip_epsilon": 0.2}, []),
    ({"parallel_training": "mp", "agent_devices": None}, ["agent_devices"]),
    ({"parallel_training": "mp", "agent_devices": ["cpu"]}, []),
    ({"turn_order": "sequential", "joint_mode": "cross"}, ["turn_order"]),
    ({"turn_order": "sequential", "joint_mode": "aligned"}, []),
    ({"num_inner_epochs": 3}, []),  # a class without clip_epsilon has no such rule
    ({"lora_rank": None, "lora_alpha": 32.0, "lora_dropout": 0.1, "lora_target_modules": None},
     ["lora_alpha", "lora_dropout"]),
    ({"lora_rank": 8, "lora_alpha": 32.0, "lora_dropout": 0.1, "lora_target_modules": ["q_proj"]}, []),
    ({"lora_alpha": 32.0}, []),  # no lora_rank: not an agent's settings
])
def test_combination_rules_by_hand(settings, expected) -> None:
    problems = combination_problems(SimpleNamespace(**settings))
    assert [p.split(":")[0] for p in problems] == expected


def test_group_size_rule_by_hand() -> None:
    assert group_size_problem("magrpo", 1) == "must be >= 2 for magrpo (the group baseline needs siblings)"
    assert group_size_problem("marloo", 2) is None
    assert group_size_problem("iac", 1) is None and group_size_problem("maac", 1) is None
    assert group_size_problem("madpo", 1) is None  # pairs compare candidates; madpo reads no num_generations
    assert group_size_problem("marlhf_iter", 1, "marloo") == (
        "must be >= 2 for rl_algorithm 'marloo' (the group baseline needs siblings; iac/maac learn a critic "
        "instead)")
    assert group_size_problem("marlhf", 1, "maac") is None


def test_the_group_size_rule_is_one_of_the_combination_rules() -> None:
    """Every holder of the settings (the run config's trainer section, each config class) checks it by
    checking the combination rules, and says the same."""
    assert combination_problems(SimpleNamespace(algorithm="grpo", num_generations=1)) == [
        "num_generations: must be >= 2 for grpo (the group baseline needs siblings)"]
    assert combination_problems(SimpleNamespace(num_generations=1)) == []  # no algorithm: an agent's settings
    with pytest.raises(ValueError, match="^num_generations: must be >= 2 for rl_algorithm 'magrpo'"):
        MARLHFConfig(num_generations=1)
    with pytest.raises(ValueError, match="^num_generations: must be >= 2 for centralized_magrpo"):
        CentralizedMAGRPOConfig(num_generations=1)
    for trainer, message in ((
            {"algorithm": "marlhf", "num_generations": 1}, "must be >= 2 for rl_algorithm 'magrpo'"),
            ({"algorithm": "maremax", "num_generations": 1}, "must be >= 2 for maremax")):
        with pytest.raises(ValueError, match=f"trainer.num_generations: {message}"):
            parse_run_config({"agents": [{"name": "a"}], "trainer": trainer})
    assert parse_run_config({"agents": [{"name": "a"}], "trainer": {
        "algorithm": "marlhf", "rl_algorithm": "iac", "num_generations": 1}}).trainer.num_generations == 1


def _members(algorithm: str) -> set[str]:
    return {name for name, s in CATALOG.items() if algorithm in s.reads or algorithm in s.compat_only}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_config_class_has_what_the_catalog_says_its_algorithm_reads(algorithm) -> None:
    """A class, its compat_only list and the run config's "not used" list follow each setting's reads."""
    cls = CONFIG_CLASSES[algorithm]
    assert set(cls.field_names()) == _members(algorithm)
    read = {name for name, s in CATALOG.items() if algorithm in s.reads}
    assert set(cls.compat_only) == _members(algorithm) - read
    assert set(read_settings(algorithm)) == read & set(TrainerSpec.model_fields)
    trainer_settings = {name for name in TrainerSpec.model_fields
                        if CATALOG.get(name) and CATALOG[name].run_config == "trainer"}
    assert set(unused_settings(algorithm)) == trainer_settings - read
    assert not set(unused_settings(algorithm)) & set(read_settings(algorithm))


def test_the_shared_and_preset_classes_follow_the_catalog_too() -> None:
    assert set(ActorCriticConfig.field_names()) == _members("iac") & _members("maac")
    for preset in (MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig):
        assert preset.field_names() == MAGRPOConfig.field_names()
        assert set(preset.field_names()) == _members(preset.algorithm_name)
    for base, cls in ((MAGRPOConfig, CentralizedMAGRPOConfig), (MADPOConfig, MADPOIterConfig),
                      (MARLHFConfig, MARLHFIterConfig), (ActorCriticConfig, IACConfig),
                      (ActorCriticConfig, MAACConfig)):
        assert cls.field_names()[:len(base.field_names())] == base.field_names()  # a subclass keeps places


@pytest.mark.parametrize(("cls", "family"), [
    (MAGRPOConfig, "reinforce"), (MADPOConfig, "reinforce"), (MARLHFConfig, "reinforce"),
    (CentralizedMAGRPOConfig, "reinforce"), (IACConfig, "actor_critic"), (MAACConfig, "actor_critic")])
def test_comlrl_fields_come_first_in_comlrls_order(cls, family) -> None:
    """A CoMLRL script's positional arguments land where CoMLRL put them."""
    order = COMLRL_ORDER[family]
    assert tuple(cls.field_names()[:len(order)]) == order
    config = cls(*(getattr(cls(), name) for name in order[:3]))
    assert [getattr(config, name) for name in order[:3]] == [getattr(cls(), name) for name in order[:3]]


def test_a_comlrl_field_the_catalog_leaves_out_of_a_class_is_refused(monkeypatch) -> None:
    setting = CATALOG["num_generations"]
    monkeypatch.setitem(CATALOG, "num_generations", dataclasses.replace(setting, compat_only=frozenset()))
    with pytest.raises(ValueError, match=r"madpo: CoMLRL's fields \['num_generations'\] are neither read nor "
                                         r"accepted"):
        class_settings("madpo")


def test_the_run_config_sections_are_the_catalogs_placements() -> None:
    def placed(*places: str) -> list[str]:
        return [name for name, s in CATALOG.items() if s.run_config in places]

    assert [n for n in TrainerSpec.model_fields if n != "actor_critic"] == placed("trainer", "build")
    assert list(ActorCriticSection.model_fields) == placed("actor_critic")
    assert [n for n in AgentSpec.model_fields if n.startswith("lora_")] == placed("agent")
    assert set(placed(None)) == {"num_agents", "agent_names", "model_config", "eval_batch_size",
                                 "comparator_api_key", "vllm_python"}  # vllm_python: COOPLAB_VLLM_PYTHON
    assert set(placed("build")) == {*RUN_LEVEL, "collaboration_mode"} - {"actor_critic"}
    # the families the catalog names are the ones the algorithm table knows
    assert set(ALGORITHMS) == set(CONFIG_CLASSES) and set(ITERATIVE) | set(LEARNED_REWARD) <= set(PAIRS)


def test_the_docs_settings_table_is_current() -> None:
    written = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert written.strip() == settings_table().strip(), "run: python -m engine.schema.settings_table > docs/settings.md"


def test_the_actor_critic_section_stores_only_what_was_given() -> None:
    config = parse_run_config({"agents": [{"name": "a"}], "trainer": {
        "algorithm": "iac", "num_generations": 1, "actor_critic": {"critic_type": "q"}}})
    assert config.trainer.actor_critic.given() == {"critic_type": "q"}
    assert config.model_dump()["trainer"]["actor_critic"] == {"critic_type": "q"}
    again = parse_run_config(config.model_dump(mode="json"))
    assert again.trainer.actor_critic.given() == {"critic_type": "q"}
