"""Settings read from environment variables: the part of pydantic-settings' ``BaseSettings`` CoopLab
uses, on a plain pydantic model.

A field ``name`` of an :class:`EnvSettings` class is read from the variable ``env_prefix + name``, in
any case (``COOPLAB_HOME`` or ``cooplab_home``), as the string it holds, and validated like a keyword
argument (``"1"``/``"true"`` for a bool, a number for a float, ...); keyword arguments win over the
environment, defaults come last and are validated too. Every CoopLab setting is a scalar, so no value
is parsed as JSON. pydantic-settings itself (with its dotenv, cloud and CLI sources) cost every
``cooplab`` process about 0.05-0.1 CPU-seconds of imports, ``cooplab submit`` included.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


def environment_values(cls: type[EnvSettings], environ: os._Environ[str] | dict[str, str] | None = None
                       ) -> dict[str, str]:
    """The fields of ``cls`` that the environment sets, by field name."""
    prefix = cls.env_prefix.lower()
    wanted = {prefix + name.lower(): name for name in cls.model_fields}
    found: dict[str, str] = {}
    for key, value in (os.environ if environ is None else environ).items():
        name = wanted.get(key.lower())
        if name is not None:
            found[name] = value
    return found


class EnvSettings(BaseModel):
    """A settings class whose fields come from keyword arguments, else the environment, else defaults
    (read when an instance is made)."""

    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True, validate_default=True)
    env_prefix: ClassVar[str] = ""

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**environment_values(type(self)), **values})


__all__ = ["EnvSettings", "environment_values"]
