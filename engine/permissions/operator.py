"""What the operator of this machine allows runs to do, as one frozen value passed to where it is read.

An operator's settings (``COOPLAB_TASK_MODULES``, ``COOPLAB_UNSAFE_SANDBOX_WITHOUT_ISOLATION``,
``COOPLAB_API_HOSTS``, ``COOPLAB_ALLOW_REMOTE_CODE``, ``COOPLAB_VLLM_PYTHON`` and the ``COOPLAB_API_KEY_*``
variables) are read in ``jobs.settings`` (:func:`jobs.settings.operator_permissions`); the engine reads no
environment and holds no process-wide permission. Whoever parses, checks or trains a run config hands
an :class:`OperatorPermissions` to the function that needs it: :func:`engine.schema.run_config.parse_run_config`
(the task module allowlist), :func:`engine.permissions.run_permissions.check_permissions`,
:func:`engine.build.run.run_training` (model loading, the code sandbox, the API comparator, the vLLM
python). Two values in one process enforce independently.

:data:`LIBRARY` (every field at its default) is a script using the engine as a library, as CoMLRL's users
do: no task modules allowed, the sandbox isolated, and where nothing was applied (``None``) the script's
own choices honoured: its ``model_kwargs``, its API URL, its ``vllm_python``, its environment's API key.
The pre-flight checks and ``run_training`` still treat an unset ``api_hosts`` as an empty listing and an
unset ``allow_remote_code`` as "not allowed". Torch-free.
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.permissions.outbound import ApiHosts, parse_api_hosts
from engine.permissions.task_modules import normalise_modules
from engine.schema.secrets import KEY_VARIABLE


def handed_keys(variables: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """The API keys a process owner hands a run: the non-empty ``COOPLAB_API_KEY_*`` entries of
    ``variables`` (other entries are dropped, so no other secret of the owner reaches a run), read-only.
    None: no keys handed (library use)."""
    if variables is None:
        return None
    return types.MappingProxyType({k: v for k, v in variables.items() if KEY_VARIABLE.fullmatch(k) and v})


@dataclass(frozen=True)
class OperatorPermissions:
    """The operator's permissions (see the module docstring).

    ``task_modules``: modules (and package prefixes) run configs may name code from
    (:mod:`engine.permissions.task_modules`). ``unisolated_sandbox``: UNSAFE, model-written code may run without
    OS isolation where bubblewrap cannot be used (:mod:`engine.sandbox.boundary`). ``api_hosts``: where a
    run may send requests and keys (:mod:`engine.permissions.outbound`; None: no listing applied).
    ``allow_remote_code``: whether a config may load code that comes with a model
    (:mod:`engine.permissions.remote_code`; None: not applied). ``vllm_python``: the vLLM venv's python
    (:mod:`engine.sampling.vllm_python`; None: a library config's own). ``api_keys``: the keys a run config
    may name by variable (None: a library script's own environment); never shown by ``repr``.
    """

    task_modules: tuple[str, ...] = ()
    unisolated_sandbox: bool = False
    api_hosts: ApiHosts | None = None
    allow_remote_code: bool | None = None
    vllm_python: str | None = None
    api_keys: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        modules: Iterable[str] | str | None = self.task_modules
        object.__setattr__(self, "task_modules", normalise_modules(modules))
        object.__setattr__(self, "unisolated_sandbox", bool(self.unisolated_sandbox))
        if isinstance(self.api_hosts, str):
            object.__setattr__(self, "api_hosts", parse_api_hosts(self.api_hosts))
        if self.allow_remote_code is not None:
            object.__setattr__(self, "allow_remote_code", bool(self.allow_remote_code))
        if self.vllm_python is not None:
            object.__setattr__(self, "vllm_python", str(self.vllm_python))
        object.__setattr__(self, "api_keys", handed_keys(self.api_keys))

    def api_key(self, variable: str) -> str | None:
        """The key ``variable`` holds (None when it holds none): from the keys the owner handed over, or,
        where none were handed (a library script), from the script's own environment as CoMLRL reads it."""
        if self.api_keys is not None:
            return self.api_keys.get(variable)
        return os.environ.get(variable) or None

    def chosen_vllm_python(self, config_value: str) -> str:
        """The python to start the vLLM server with: the operator's where one was set, else ``config_value``
        (a library config's own ``vllm_python``)."""
        return self.vllm_python if self.vllm_python is not None else config_value

    def configure(self, cfg: Any) -> Any:
        """``cfg`` (an algorithm config) with the operator's vLLM python in place of its own, where one was
        set: whatever a config says, a process with operator settings starts the operator's python."""
        if self.vllm_python is not None and hasattr(cfg, "vllm_python"):
            cfg.vllm_python = self.vllm_python
        return cfg


LIBRARY = OperatorPermissions()
"""A script using the engine as a library: nothing applied by an operator."""

__all__ = ["LIBRARY", "OperatorPermissions", "handed_keys"]
