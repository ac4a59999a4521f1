"""Write the CoMLRL-compatible config classes as source, from the catalog: ``python -m engine.schema.write_configs``.

The catalog (:mod:`engine.schema.catalog`) declares each setting once; the config classes
(``MAGRPOConfig``, ``IACConfig``, ``MADPOConfig``, ...) are written from it into a marked part of
their modules, so IDEs and mypy read their fields, types and defaults. :data:`CLASSES` says which
classes there are: each one's algorithm (its settings are those the algorithm reads or accepts,
:func:`engine.schema.derive.class_settings`), bases, other defaults and docstring. A test renders
them again and compares (``tests/engine/test_engine_config_source.py``): after changing the catalog,
rerun this module. At import, :func:`engine.schema.derive.catalog_dataclass` gives every field its
catalog bounds, description and validators.
"""

from __future__ import annotations

import re
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.schema.catalog import ACTOR_CRITIC, CATALOG
from engine.schema.derive import class_settings, not_read_by

BEGIN = "# --- generated from engine.schema.catalog by `python -m engine.schema.write_configs`: edit the catalog and rerun ---"
END = "# --- end of the generated config classes ---"

_ACTOR_CRITIC_DEFAULTS = {"rollout_buffer_size": 8, "top_k": None, "num_train_epochs": 40, "num_generations": 1,
                          "logging_steps": 1}
_MADPO_DEFAULTS = {"num_turns": 1, "early_termination_threshold": None}
# the DPO trainers' own defaults: CoMLRL clips no gradient (measured: clipping at 1.0 cost about a fifth of
# the learning on the issue-25 workload, docs/preference.md); MARLHF's RL stage keeps the MAGRPO defaults
_DPO_DEFAULTS = {**_MADPO_DEFAULTS, "max_grad_norm": None}
MARLHF_CRITIC_DEFAULTS = {"critic_learning_rate": None, "value_clip_range": 0.2}  # CoMLRL's MARLHFConfig
_ITERATIVE_DEFAULTS = {"preference_num_candidates": 20, "preference_pairs_per_sample": 4,
                       "pair_selection": "comparator_reward"}


@dataclass(frozen=True)
class ClassSpec:
    """One config class: its module, name, algorithm (a tuple: a base shared by several), bases (source
    names in its module), defaults other than the catalog's, class variables and docstring."""

    module: str
    name: str
    algorithms: str | tuple[str, ...]
    bases: tuple[str, ...]
    doc: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    class_vars: Mapping[str, Any] = field(default_factory=dict)


_CONFIGS, _AC, _PREF = "engine.schema.configs", "engine.schema.actor_critic_configs", "engine.schema.preference_configs"

CLASSES: tuple[ClassSpec, ...] = (
    ClassSpec(_CONFIGS, "MAGRPOConfig", "magrpo", ("ConfigModel",),
              "Settings of a :class:`engine.trainer.MAGRPOTrainer` run (CoMLRL 1.4.3's names and defaults first)."),
    ClassSpec(_CONFIGS, "MAREINFORCEConfig", "mareinforce", ("MAGRPOConfig",),
              "MAGRPO with no baseline (``advantage_mode='raw'``), as CoMLRL's MAREINFORCE.",
              class_vars={"forced_advantage_mode": "raw"}),
    ClassSpec(_CONFIGS, "MAReMaxConfig", "maremax", ("MAGRPOConfig",),
              "MAGRPO with the group maximum as baseline (``advantage_mode='max'``), as CoMLRL's MAReMax.",
              class_vars={"forced_advantage_mode": "max"}),
    ClassSpec(_CONFIGS, "MARLOOConfig", "marloo", ("MAGRPOConfig",),
              "MAGRPO with the leave-one-out baseline (``advantage_mode='rloo'``), as CoMLRL's MARLOO.",
              class_vars={"forced_advantage_mode": "rloo"}),
    ClassSpec(_AC, "ActorCriticConfig", ACTOR_CRITIC, ("_ActorCritic",),
              "Settings shared by :class:`IACConfig` and :class:`MAACConfig` (CoMLRL's first).",
              defaults=_ACTOR_CRITIC_DEFAULTS),
    ClassSpec(_AC, "IACConfig", "iac", ("ActorCriticConfig",),
              "Independent actor-critic: every agent has its own critic (CoMLRL's ``IACConfig``).\n"
              "``use_separate_critic=False`` puts a value head on the agent's own backbone, trained with the actor\n"
              "by one optimizer (``value_loss_coef``).",
              defaults={**_ACTOR_CRITIC_DEFAULTS, "value_clip_range": 0.2}),
    ClassSpec(_AC, "MAACConfig", "maac", ("ActorCriticConfig",),
              "Multi-agent actor-critic: one centralised critic reads every agent's observation (CoMLRL's\n"
              "``MAACConfig``); ``value_clip_range`` is a CoopLab extra (``None`` = unclipped as in CoMLRL).",
              defaults=_ACTOR_CRITIC_DEFAULTS),
    ClassSpec(_PREF, "MADPOConfig", "madpo", ("_Preference",),
              "Settings of a :class:`engine.preference.MADPOTrainer` run (CoMLRL 1.4.3's ``MADPOConfig`` names and\n"
              "defaults first). ``train_batch_size`` pairs make one optimizer step (empty = ``rollout_buffer_size``,\n"
              "resolved when the config is made, as CoMLRL does); no gradient clipping unless ``max_grad_norm`` is set.",
              defaults=_DPO_DEFAULTS),
    ClassSpec(_PREF, "MADPOIterConfig", "madpo_iter", ("_Iterative", "MADPOConfig"),
              "Settings of a :class:`engine.preference.madpo_iter.MADPOIterTrainer` run (CoMLRL 1.4.3's\n"
              "``MADPOIterConfig`` names and defaults): ``num_iterations`` rounds of collect-then-train, candidates\n"
              "compared with ``comparator_policy``'s.",
              defaults={**_DPO_DEFAULTS, "num_train_epochs": 1, **_ITERATIVE_DEFAULTS}),
    ClassSpec(_PREF, "CentralizedMAGRPOConfig", "centralized_magrpo", ("_Centralized", "MAGRPOConfig"),
              "Settings of a :class:`engine.preference.centralized_magrpo.CentralizedMAGRPOTrainer` run:\n"
              "``MAGRPOConfig`` plus ``collaboration_mode='centralized'`` (CoMLRL 1.4.3's ``CentralizedMAGRPOConfig``).",
              defaults={"num_turns": 1, "collaboration_mode": "centralized"}),
    ClassSpec(_PREF, "MARLHFConfig", "marlhf", ("_LearnedReward",),
              "Settings of a :class:`engine.preference.marlhf.MARLHFTrainer` run (CoMLRL 1.4.3's ``MARLHFConfig``\n"
              "names and defaults): the pairs' settings, the reward model's, and the settings of the RL stage\n"
              "(``rl_algorithm``: a MAGRPO-family baseline, or iac/maac with the critic settings).",
              defaults={**_MADPO_DEFAULTS, **MARLHF_CRITIC_DEFAULTS}),
    ClassSpec(_PREF, "MARLHFIterConfig", "marlhf_iter", ("_IterativeLearnedReward", "MARLHFConfig"),
              "Settings of a :class:`engine.preference.marlhf_iter.MARLHFIterTrainer` run (CoMLRL 1.4.3's\n"
              "``MARLHFIterConfig`` names and defaults): ``num_iterations`` rounds of collect pairs against\n"
              "``comparator_policy``, refit the reward model, RL against it.",
              defaults={**_MADPO_DEFAULTS, "num_train_epochs": 2, **_ITERATIVE_DEFAULTS, "reward_num_train_epochs": 2,
                        **MARLHF_CRITIC_DEFAULTS}),
)


def type_source(annotation: Any) -> str:
    """``annotation`` as source text (``int | None``, ``Literal['a', 'b']``, ``dict[str, Any]``)."""
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "Any"
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        return " | ".join(type_source(arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(arg) for arg in typing.get_args(annotation))}]"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_source(arg) for arg in typing.get_args(annotation))}]"
    if isinstance(annotation, type):
        return annotation.__name__
    raise TypeError(f"no source form for the catalog type {annotation!r}")


def class_defaults(spec: ClassSpec) -> dict[str, Any]:
    """Every setting of ``spec``'s class with its default (the class's own, else the catalog's), in field order."""
    algorithms = (spec.algorithms,) if isinstance(spec.algorithms, str) else spec.algorithms
    return {name: spec.defaults.get(name, CATALOG[name].default) for name in class_settings(*algorithms)}


def _render_class(spec: ClassSpec, specs: Mapping[str, ClassSpec]) -> str:
    inherited: dict[str, Any] = {}
    for base in spec.bases:  # a generated base's fields keep their places; only a changed default is repeated
        if base in specs:
            inherited = {**class_defaults(specs[base]), **inherited}
    lines = [f"@catalog_dataclass\nclass {spec.name}({', '.join(spec.bases)}):",
             '    """' + spec.doc.replace("\n", "\n    ") + '"""', ""]
    if isinstance(spec.algorithms, str):
        defaults = class_defaults(spec)
        compat = tuple(not_read_by(spec.algorithms, list(defaults)))
        lines.append(f"    algorithm_name = {spec.algorithms!r}")
        lines.append(f"    compat_only: ClassVar[tuple[str, ...]] = {compat!r}" if len(repr(compat)) < 70 else
                     "    compat_only: ClassVar[tuple[str, ...]] = (\n" + "".join(f"        {name!r},\n" for name in compat) + "    )")
    for name, value in spec.class_vars.items():
        lines.append(f"    {name} = {value!r}")
    fields = [f"    {name}: {type_source(CATALOG[name].annotation)} = {value!r}"
              for name, value in class_defaults(spec).items()
              if name not in inherited or inherited[name] != value or type(inherited[name]) is not type(value)]
    if fields:
        lines += ["", *fields]
    return "\n".join(lines) + "\n"


def render(module: str) -> str:
    """The generated part of ``module``: its config classes, between the markers."""
    specs = {spec.name: spec for spec in CLASSES}
    classes = [_render_class(spec, specs) for spec in CLASSES if spec.module == module]
    return BEGIN + "\n\n\n" + "\n\n".join(classes) + "\n\n" + END + "\n"


def module_path(module: str) -> Path:
    return Path(__file__).resolve().parents[2].joinpath(*module.split(".")).with_suffix(".py")


def written(module: str) -> str:
    """The generated part as the module's file holds it now (empty if the markers are missing)."""
    found = re.search(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n", module_path(module).read_text(), re.S)
    return found.group(0) if found else ""


def write(module: str) -> bool:
    """Replace the generated part of ``module``'s file; True if it changed."""
    path = module_path(module)
    text = path.read_text()
    old = written(module)
    if not old:
        raise ValueError(f"{path}: the markers of the generated part are missing; put\n{BEGIN}\n{END}\nwhere the "
                         f"classes go")
    new = render(module)
    if new != old:
        path.write_text(text.replace(old, new))
    return new != old


RUN_CONFIG_TYPES = "engine.schema.run_config_types"


def render_run_config_types() -> str:
    """The type checker's view of the run config's sections, which :mod:`engine.schema.run_config` builds
    with ``create_model`` from the catalog: each section's fields with their types, in order."""
    from engine.schema import run_config  # the built sections

    sections: list[type[BaseModel]] = [run_config.AgentSpec, run_config.ActorCriticSection, run_config.TrainerSpec]
    bases = sorted({section.__mro__[1].__name__ for section in sections})
    out = ['"""The run config\'s sections as the type checker reads them (:mod:`engine.schema.run_config` builds them',
           'with ``create_model`` from the catalog, which mypy cannot follow).',
           "",
           "Written by ``python -m engine.schema.write_configs`` from the built classes; a test compares. Imported",
           'only by type checkers (``if TYPE_CHECKING`` in :mod:`engine.schema.run_config`)."""',
           "",
           "from __future__ import annotations",
           "",
           "from typing import Any, Literal",
           "",
           f"from engine.schema.run_config_sections import {', '.join(bases)}"]
    for section in sections:
        base = section.__mro__[1]
        assert issubclass(base, BaseModel)
        out += ["", "", f"class {section.__name__}({base.__name__}):",
                '    """' + (section.__doc__ or "").strip().replace("\n", "\n    ") + '"""', ""]
        out += [f"    {name}: {type_source(info.annotation)}{_default_source(info)}"
                for name, info in section.model_fields.items() if name not in base.model_fields]
    return "\n".join(out) + "\n"


def _default_source(info: FieldInfo) -> str:
    factory = info.default_factory
    if factory is not None:
        return f" = {factory.__name__}()"
    return "" if info.is_required() else f" = {info.default!r}"


def write_run_config_types() -> bool:
    path = module_path(RUN_CONFIG_TYPES)
    new = render_run_config_types()
    if path.exists() and path.read_text() == new:
        return False
    path.write_text(new)
    return True


def main() -> int:
    changed = [module for module in dict.fromkeys(spec.module for spec in CLASSES) if write(module)]
    if write_run_config_types():
        changed.append(RUN_CONFIG_TYPES)
    print("rewrote " + ", ".join(changed) if changed else "the config classes match the catalog")
    return 0


if __name__ == "__main__":
    sys.exit(main())
