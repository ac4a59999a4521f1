"""Classes built from the catalog: CoMLRL-compatible configs (pydantic dataclasses) and schema sections.

The config classes are source written from the catalog (:mod:`engine.schema.write_configs`);
``catalog_dataclass`` makes each a keyword-constructible, mutable dataclass (CoMLRL's style, validated
on construction and on assignment) whose invalid values raise :class:`ValueError` starting with the
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
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar, cast, dataclass_transform

from pydantic import BeforeValidator, ConfigDict, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.fields import FieldInfo

from engine.schema.catalog import ACTOR_CRITIC, CATALOG, COMLRL_ORDER, Placement
from engine.schema.rules import combination_problems
from engine.schema.secrets import HEADER_SETTINGS, MASK, SECRET_SETTINGS, is_sensitive_header

_C = TypeVar("_C")
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
    """Behaviour shared by the CoMLRL-compatible config classes (:func:`catalog_dataclass`)."""

    algorithm_name: ClassVar[str | None] = None  # None: a base shared by several algorithms
    compat_only: ClassVar[tuple[str, ...]] = ()  # accepted from CoMLRL scripts, not read (from the catalog)
    forced_advantage_mode: ClassVar[str | None] = None
    if TYPE_CHECKING:  # set by catalog_dataclass on every config class
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
        __pydantic_fields__: ClassVar[dict[str, FieldInfo]]
        train_batch_size: int | None
        rollout_buffer_size: int

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
        """Plain dict of every field (for sinks, checkpoints and reports), each credential replaced by
        ``***``: a key setting's value, and the value of every credential-named header
        (:mod:`engine.schema.secrets` says which); absent or empty ones stay."""
        out = dataclasses.asdict(self)
        for name in SECRET_SETTINGS:
            if out.get(name):
                out[name] = MASK
        for name in HEADER_SETTINGS:
            headers = out.get(name)
            if isinstance(headers, dict):
                out[name] = {k: (MASK if is_sensitive_header(k) else v) for k, v in headers.items()}
        return out

    @classmethod
    def field_default(cls, name: str) -> Any:
        """The class's default of setting ``name``."""
        return cls.__pydantic_fields__[name].default

    @classmethod
    def field_names(cls) -> list[str]:
        """The field names, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]


@dataclass_transform()
def catalog_dataclass(cls: type[_C]) -> type[_C]:
    """Make a config class written by :mod:`engine.schema.write_configs` a CoMLRL-style dataclass: each field
    its catalog setting's type, bounds, description and validators, with the default the class gives;
    keyword-constructible, mutable, validated on construction and on assignment; an invalid value raises
    :class:`ValueError` starting with the field name."""
    own = cls.__dict__.get("__annotations__", {})
    for name in own:
        if isinstance(own[name], str) and own[name].startswith("ClassVar"):
            continue
        annotation, info = setting_field(name, default=cls.__dict__[name])
        own[name] = annotation
        setattr(cls, name, info)
    made = pydantic_dataclass(cls, config=_CONFIG)
    init = made.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except ValidationError as exc:
            raise ValueError(readable_problems(exc)) from None

    made.__init__ = __init__  # type: ignore[method-assign]  # the validation errors' wording, kept
    return cast("type[_C]", made)
