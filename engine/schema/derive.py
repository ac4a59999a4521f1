"""Classes built from the catalog: CoMLRL-compatible configs (pydantic dataclasses) and schema sections.

``config_class`` makes a keyword-constructible, mutable dataclass (CoMLRL's style, validated on
construction and on assignment) whose invalid values raise :class:`ValueError` starting with the
field name; ``schema_fields`` gives the same settings as pydantic model fields for the run-config
schema. Both read each setting's type, bounds and description from the catalog, and which settings
a class or section has from each setting's ``reads``/``compat_only``/``run_config``
(:func:`class_settings`, :func:`run_config_settings`); a class only chooses, where it must, another
default.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import typing
from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.fields import FieldInfo

from engine.schema.catalog import ACTOR_CRITIC, CATALOG, COMLRL_ORDER, Placement
from engine.schema.rules import combination_problems
from engine.schema.secrets import masked

_CONFIG = ConfigDict(validate_assignment=True, extra="forbid", arbitrary_types_allowed=True)


def class_settings(*algorithms: str) -> tuple[str, ...]:
    """The settings a config class of ``algorithms`` has (every one of them reads or accepts it): CoMLRL's
    fields first, in CoMLRL's order (:data:`engine.schema.catalog.COMLRL_ORDER`), then catalog order."""
    names = [name for name, setting in CATALOG.items()
             if all(a in setting.reads or a in setting.compat_only for a in algorithms)]
    family = "actor_critic" if set(algorithms) <= set(ACTOR_CRITIC) else "reinforce"
    missing = [name for name in COMLRL_ORDER[family] if name not in names]
    if missing:  # a CoMLRL script passes these: the catalog must give the class every one
        raise ValueError(f"{'/'.join(algorithms)}: CoMLRL's fields {missing} are neither read nor accepted "
                         f"(engine.schema.catalog reads/compat_only)")
    return (*COMLRL_ORDER[family], *(name for name in names if name not in COMLRL_ORDER[family]))


def run_config_settings(*places: Placement) -> tuple[str, ...]:
    """The settings a run config holds at ``places`` (``"trainer"``, ``"build"``, ...), in catalog order."""
    return tuple(name for name, setting in CATALOG.items() if setting.run_config in places)


def not_read_by(algorithm: str, names: Sequence[str]) -> list[str]:
    """Those of ``names`` that ``algorithm`` does not read (a config class may still accept them)."""
    return [name for name in names if algorithm not in CATALOG[name].reads]


def setting_field(name: str, *, optional: bool = False, required: bool = False,
                  **override: Any) -> tuple[Any, FieldInfo]:
    """``(annotation, FieldInfo)`` of a catalog setting, optionally with another ``default``;
    ``optional`` also accepts ``None`` (a run config's "the algorithm's value"), ``required`` refuses it
    (a run config's recorded ``seed``)."""
    setting = CATALOG[name]
    info = FieldInfo.merge_field_infos(setting.field, **override)  # a copy: classes never share one
    annotation = setting.annotation | None if optional else setting.annotation
    if required:
        annotation = functools.reduce(operator.or_, [a for a in typing.get_args(annotation) if a is not type(None)])
    if setting.before is not None:
        annotation = Annotated[annotation, BeforeValidator(setting.before)]
    return annotation, info


def schema_fields(names: Sequence[str], defaults: Mapping[str, Any] | None = None,
                  optional: Collection[str] = (), required: Collection[str] = ()) -> dict[str, tuple[Any, FieldInfo]]:
    """Catalog settings as ``create_model`` field definitions, in the given order; those named in
    ``optional`` also accept ``None``, those in ``required`` do not."""
    defaults = defaults or {}
    return {name: setting_field(name, optional=name in optional, required=name in required,
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

    algorithm_name: ClassVar[str | None] = None  # None: a base shared by several algorithms
    compat_only: ClassVar[tuple[str, ...]] = ()  # accepted from CoMLRL scripts, not read (from the catalog)
    forced_advantage_mode: ClassVar[str | None] = None

    def __post_init__(self) -> None:
        if hasattr(self, "advantage_mode"):
            mode = self.forced_advantage_mode or self.advantage_mode or "mean"
            object.__setattr__(self, "advantage_mode", mode)  # not re-validated: one of the choices
        problems = combination_problems(self)
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
    algorithms: str | tuple[str, ...],
    *,
    doc: str,
    defaults: Mapping[str, Any] | None = None,
    bases: tuple[type, ...] = (ConfigModel,),
    module: str,
    **class_vars: Any,
) -> type:
    """A CoMLRL-style config dataclass of one algorithm, or a base of several (``algorithms`` a tuple),
    with the settings :func:`class_settings` gives (see the module docstring). A dataclass base's fields
    keep their places; the class's other settings follow."""
    settings = class_settings(*((algorithms,) if isinstance(algorithms, str) else algorithms))
    if isinstance(algorithms, str):
        class_vars = {"algorithm_name": algorithms, "compat_only": tuple(not_read_by(algorithms, settings)),
                      **class_vars}
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


def subclass(parent: type, name: str, algorithm: str, *, doc: str, module: str,
             defaults: Mapping[str, Any] | None = None, **class_vars: Any) -> type:
    """A config class of ``algorithm`` with ``parent``'s settings, other class variables and, optionally,
    other defaults."""
    cls = config_class(name, algorithm, doc=doc, defaults={**_defaults_of(parent), **(defaults or {})},
                       bases=(parent,), module=module, **class_vars)
    if cls.field_names() != parent.field_names():
        raise ValueError(f"{name}: {algorithm} does not read what {parent.__name__} reads "
                         f"(engine.schema.catalog)")
    return cls


def _defaults_of(cls: type) -> dict[str, Any]:
    return {name: info.default for name, info in cls.__pydantic_fields__.items()}
