"""Whether loading a model may run Python that comes with it: the operator's remote-code permission.

``from_pretrained(..., trust_remote_code=True)`` imports the modules a folder's ``config.json``
(or ``tokenizer_config.json``) names in ``auto_map``: any Python file next to the weights, or in a
cached hub model, runs in the trainer with the worker's rights. A run config could ask for it through
an agent's ``model_kwargs``, which would get round the task-module allowlist (any cached hub model
with custom code would do). So (the other ``from_pretrained`` arguments a config may pass are listed in
:mod:`engine.permissions.model_kwargs`):

- a run config may ask for code that comes with a model (:data:`REMOTE_CODE_KWARGS`: ``trust_remote_code``,
  ``use_kernels``, and an ``attn_implementation`` other than :data:`SAFE_ATTENTION`, since
  ``flash_attention_2``, ``org/kernel`` or a mapping may load a kernel from the hub, or offline any kernel
  in the cache) only when the operator allows it, with the ``COOPLAB_ALLOW_REMOTE_CODE`` setting (read in ``jobs.settings`` and
  passed as ``allow_remote_code`` of :class:`engine.permissions.operator.OperatorPermissions`; the engine reads
  no environment);
- whatever a config says, loading passes ``trust_remote_code=False`` unless code was asked for and
  allowed (:func:`trust_remote_code`), so an ``auto_map`` never runs on its own, and transformers
  never stops to ask on the terminal.

The permission is None for a script using the engine as a library, as CoMLRL's users do (no operator
settings applied): its own ``model_kwargs`` are then honoured as given.
The pre-flight checks and :func:`engine.build.run.run_training` treat None as "not allowed". Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SETTING = "COOPLAB_ALLOW_REMOTE_CODE"
# from_pretrained arguments that run Python shipped with a model: its auto_map modules, or kernels
# fetched from the hub (an attn_implementation other than SAFE_ATTENTION)
REMOTE_CODE_KWARGS = ("trust_remote_code", "use_kernels", "attn_implementation")
# Attention implementations built into transformers (5.x) that never fetch a kernel. Every other value may:
# "org/kernel[@rev][:fn]" names a hub kernel; flash_attention_2/3/4 fall back to one from kernels-community
# where flash_attn is not installed and the kernels package is (and a model may redirect a flash request to
# a kernel it lists); a mapping sets one per sub-config, any of which may be such a value.
SAFE_ATTENTION = ("eager", "sdpa", "flex_attention")

class RemoteCodeRefused(ValueError):
    """A config asked to run code that comes with a model, and the operator does not allow it."""


def asked_for(kwargs: Mapping[str, Any] | None) -> list[str]:
    """The ``from_pretrained`` arguments in ``kwargs`` that would run code shipped with a model."""
    asked: list[str] = []
    if kwargs is None:
        return asked
    for name in REMOTE_CODE_KWARGS:
        if name not in kwargs:
            continue
        value = kwargs[name]
        if name == "attn_implementation":
            if value is not None and value not in SAFE_ATTENTION:  # a hub kernel, maybe (see SAFE_ATTENTION)
                asked.append(name)
        elif value is not False and value is not None:
            asked.append(name)
    return asked


def remote_code_problem(kwargs: Mapping[str, Any] | None, allowed: bool | None) -> str | None:
    """Why ``kwargs`` may not be passed to ``from_pretrained`` under ``allowed`` (None counts as not
    allowed), or None."""
    asked = asked_for(kwargs)
    if not asked or allowed:
        return None
    what = ", ".join(f"{name}={kwargs[name]!r}" for name in asked)  # type: ignore[index]
    return (f"{what} would run Python that comes with the model (its auto_map modules or hub kernels) in the "
            f"trainer; remove it, or an operator who trusts every model the workers can load sets {SETTING}=true "
            f"for the dashboard and the workers")


def trust_remote_code(kwargs: Mapping[str, Any] | None, allowed: bool | None) -> bool:
    """The ``trust_remote_code`` value to load with: True only when ``kwargs`` ask for it and it is allowed
    (None, library use: as the caller asks). Raises :class:`RemoteCodeRefused` when asked but not allowed."""
    if allowed is False:
        problem = remote_code_problem(kwargs, allowed)
        if problem:
            raise RemoteCodeRefused(problem)
    return bool((kwargs or {}).get("trust_remote_code"))


__all__ = ["REMOTE_CODE_KWARGS", "SAFE_ATTENTION", "SETTING", "RemoteCodeRefused", "asked_for", "remote_code_problem",
           "trust_remote_code"]
