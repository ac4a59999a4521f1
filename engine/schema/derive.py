"""Classes built from the catalog: CoMLRL-compatible configs (pydantic dataclasses) and schema sections.

``config_class`` makes a keyword-constructible, mutable dataclass (CoMLRL's style, validated on
construction and on assignment) whose invalid values raise :class:`ValueError` starting with the
field name; ``schema_fields`` gives the same settings as pydantic model fields for the run-config
schema. Both read each setting's type, bounds and description from the catalog; a class only
chooses which settings it has and, where it must, another default.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.fields import FieldInfo

from engine.schema.catalog import CATALOG
from engine.schema.rules import combination_problems, group_size_problem
from engine.schema.secrets import masked

_CONFIG = ConfigDict(validate_assignment=True, extra="forbid", arbitrary_types_allowed=True)


def setting_field(name: str, *, optional: bool = False, **override: Any) -> tuple[Any, FieldInfo]:
    """``(annotation, FieldInfo)`` of a catalog setting, optionally with another ``default``;
    ``optional`` also accepts ``None`` (a run config's "the algorithm's value")."""
    setting = CATALOG[name]
    info = FieldInfo.merge_field_infos(setting.field, **override)  # a copy: classes never share one
    annotation = setting.annotation | None if optional else setting.annotation
    if setting.before is not None:
        annotation = Annotated[annotation, BeforeValidator(setting.before)]
    return annotation, info


def schema_fields(names: Sequence[str], defaults: Mapping[str, Any] | None = None,
                  optional: Collection[str] = ()) -> dict[str, tuple[Any, FieldInfo]]:
    """Catalog settings as ``create_model`` field definitions, in the given order; those named in
    ``optional`` also accept ``None``."""
    defaults = defaults or {}
    return {name: setting_field(name, optional=name in optional,
                                **({"default": defaults[name]} if name in defaults else {}))
            for name in names}


def agent_override(name: str) -> Any:
    """The type of a per-agent override of a catalog setting: the setting's type and bounds, or None
    (the trainer's value)."""
    setting = CATALOG[name]
    if not setting.field.metadata:
        return setting.annotation | None
    return Annotated[setting.annotation | None, *setting.field.metadata]


def readable_problems(error: ValidationError) -> str:
    """``field: message`` for each problem (a rule's message already names its field)."""
    lines = []
    for item in error.errors():
        message = item["msg"].removeprefix("Value error, ")
        lines.append(message if not item["loc"] else f"{item['loc'][0]}: {message}")
    return "; ".join(lines)


class ConfigModel:
    """Behaviour shared by the CoMLRL-compatible config classes built by :func:`config_class`."""

    algorithm_name: ClassVar[str] = "magrpo"
    group_baseline: ClassVar[bool] = True  # the MAGRPO family needs >= 2 samples per node
    forced_advantage_mode: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        if hasattr(self, "advantage_mode"):
            mode = self.forced_advantage_mode or self.advantage_mode or "mean"
            object.__setattr__(self, "advantage_mode", mode)  # not re-validated: one of the choices
        problems = combination_problems(self)
        if self.group_baseline and hasattr(self, "num_generations"):
            problem = group_size_problem(self.algorithm_name, self.num_generations)
            if problem:
                problems.insert(0, f"num_generations: {problem}")
        if problems:
            raise ValueError(problems[0])

    @property
    def effective_train_batch_size(self) -> int:
        """Nodes (samples) per optimizer step: ``train_batch_size`` or ``rollout_buffer_size``."""
        return self.train_batch_size or self.rollout_buffer_size

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (for sinks, checkpoints and reports), credentials masked
        (:func:`engine.schema.secrets.masked`)."""
        return masked(dataclasses.asdict(self))

    @classmethod
    def field_names(cls) -> list[str]:
        """The field names, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]


def config_class(
    name: str,
    settings: Sequence[str],
    *,
    doc: str,
    defaults: Mapping[str, Any] | None = None,
    bases: tuple[type, ...] = (ConfigModel,),
    module: str,
    **class_vars: Any,
) -> type:
    """A CoMLRL-style config dataclass with ``settings`` from the catalog (see the module docstring)."""
    defaults = defaults or {}
    specs = []
    for setting in settings:
        annotation, info = setting_field(setting, **({"default": defaults[setting]} if setting in defaults else {}))
        specs.append((setting, annotation, dataclasses.field(default=info)))
    namespace = {"__doc__": doc, "__module__": module, **class_vars}
    cls = pydantic_dataclass(dataclasses.make_dataclass(name, specs, bases=bases, namespace=namespace),
                             config=_CONFIG)
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except ValidationError as exc:
            raise ValueError(readable_problems(exc)) from None

    cls.__init__ = __init__
    return cls


def subclass(parent: type, name: str, *, doc: str, module: str, defaults: Mapping[str, Any] | None = None,
             **class_vars: Any) -> type:
    """A config class with ``parent``'s settings, other class variables and, optionally, other defaults."""
    return config_class(name, parent.field_names(), doc=doc, defaults={**_defaults_of(parent), **(defaults or {})},
                        bases=(parent,), module=module, **class_vars)


def _defaults_of(cls: type) -> dict[str, Any]:
    return {name: info.default for name, info in cls.__pydantic_fields__.items()}
