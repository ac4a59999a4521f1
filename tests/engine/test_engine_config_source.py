"""The config classes are source written from the catalog (engine.schema.write_configs): the files hold
exactly what the catalog gives, so the catalog stays the one declaration."""

import dataclasses

import pytest
from pydantic.fields import FieldInfo

from engine.schema import write_configs
from engine.schema.catalog import CATALOG
from engine.schema.configs import MAGRPOConfig
from engine.schema.derive import class_settings
from engine.schema.preference_configs import MADPOIterConfig

MODULES = sorted({spec.module for spec in write_configs.CLASSES})


@pytest.mark.parametrize("module", MODULES)
def test_the_written_classes_are_what_the_catalog_gives(module):
    assert write_configs.written(module) == write_configs.render(module), (
        f"{module}: the config classes differ from the catalog; run `python -m engine.schema.write_configs`")


def test_a_changed_catalog_default_changes_the_rendered_source(monkeypatch):
    setting = CATALOG["num_generations"]
    changed = dataclasses.replace(setting, field=FieldInfo.merge_field_infos(setting.field, default=6))
    monkeypatch.setitem(CATALOG, "num_generations", changed)
    assert "    num_generations: int = 6\n" in write_configs.render("engine.schema.configs")
    assert write_configs.written("engine.schema.configs") != write_configs.render("engine.schema.configs")


def test_the_classes_keep_the_catalog_fields_defaults_and_bounds():
    assert MAGRPOConfig.field_names() == list(class_settings("magrpo"))
    assert MAGRPOConfig().num_generations == CATALOG["num_generations"].default
    assert MADPOIterConfig().pair_selection == "comparator_reward"  # a class's own default
    with pytest.raises(ValueError, match="^num_generations: "):
        MAGRPOConfig(num_generations=0)  # the catalog's bound
    assert MAGRPOConfig(joint_mode="crossed").joint_mode == "cross"  # the catalog's alias reader


@pytest.mark.parametrize("annotation, source", [(int | None, "int | None"), (list[str] | None, "list[str] | None"),
                                                (CATALOG["advantage_mode"].annotation,
                                                 "Literal['mean', 'raw', 'max', 'rloo'] | None")])
def test_type_source(annotation, source):
    assert write_configs.type_source(annotation) == source



def test_the_type_checkers_view_of_the_run_config_is_what_it_builds():
    written = write_configs.module_path(write_configs.RUN_CONFIG_TYPES).read_text()
    assert written == write_configs.render_run_config_types(), (
        "engine/schema/run_config_types.py differs from the run config's sections; run "
        "`python -m engine.schema.write_configs`")
    assert "    num_generations: int = 4\n" in written
