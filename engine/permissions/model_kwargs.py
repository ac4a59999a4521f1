"""Which ``from_pretrained`` keyword arguments a run config's ``model_kwargs`` may pass: an allowlist.

``from_pretrained`` takes dozens of arguments, and several reach past the model a config names:
``cache_dir``, ``subfolder`` and ``gguf_file`` read other files, ``offload_folder`` writes a folder,
``device_map`` and ``max_memory`` place weights on devices (and the disk) the worker did not choose,
``token`` and ``local_files_only=False`` talk to the hub, ``quantization_config``, ``use_kernels`` and
``kernel_config`` load kernels, and any other name becomes a config attribute. A run config (stored
from the dashboard, run by a worker) may pass only :data:`ALLOWED`, each with the values it lists:

============================  ==================================================================
``dtype``, ``torch_dtype``    ``auto``, ``float32``, ``float16``, ``bfloat16`` (a string: the
                              loader looks any other name up as an attribute of ``torch``)
``attn_implementation``       ``eager``, ``sdpa``, ``flex_attention``: built into transformers.
                              ``flash_attention_2/3/4`` fall back to a hub kernel
                              (``kernels-community/...``) where ``flash_attn`` is missing and
                              ``kernels`` is installed, and ``org/kernel`` or a mapping per
                              sub-config names one: those are code that comes with a model
                              (:mod:`engine.permissions.remote_code`)
``low_cpu_mem_usage``         true or false
``revision``                  a branch, tag or commit (letters, digits, ``._-/``, no ``..``): which
                              cached snapshot of a hub model
context overrides             ``max_position_embeddings``, ``n_positions``,
                              ``max_sequence_length``, ``seq_length``, ``n_ctx``: a positive
                              integer (pre-flight reads them, :mod:`engine.schema.sources`)
``trust_remote_code``,        false; true only with the operator's ``COOPLAB_ALLOW_REMOTE_CODE``
``use_kernels``
============================  ==================================================================

Everything else is refused with the key named, including under ``COOPLAB_ALLOW_REMOTE_CODE`` (which
trusts a model's code, not a config's paths and devices). The trainer places and loads models itself,
so nothing a run needs is lost: ``device`` and ``torch_dtype`` are run-config settings of their own,
and where models come from is the operator's Hugging Face cache and the read roots
(:mod:`engine.permissions.read_paths`).

``allowed`` is the operator's remote-code permission as :mod:`engine.permissions.remote_code` keeps it: None
(a script using the engine as a library, no operator settings applied) passes ``model_kwargs`` as
given. Built-in models (``builtin:``) take their own ``size`` and ``seed``, checked where they are
built. Torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from engine.permissions.remote_code import SAFE_ATTENTION, asked_for, remote_code_problem

DTYPES = ("auto", "float32", "float16", "bfloat16")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}")


class ModelKwargsRefused(ValueError):
    """A config's ``model_kwargs`` hold an argument off the allowlist (or a value it does not allow)."""


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and value in choices


def _bool(value: Any) -> bool:
    return isinstance(value, bool)


def _revision(value: Any) -> bool:
    return isinstance(value, str) and bool(_REVISION.fullmatch(value)) and ".." not in value


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# name -> (whether a value is allowed, what is allowed, in words)
ALLOWED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "dtype": (_one_of(DTYPES), f"one of {', '.join(DTYPES)}"),
    "torch_dtype": (_one_of(DTYPES), f"one of {', '.join(DTYPES)}"),
    "attn_implementation": (_one_of(SAFE_ATTENTION), f"one of {', '.join(SAFE_ATTENTION)}"),
    "low_cpu_mem_usage": (_bool, "true or false"),
    "revision": (_revision, "a branch, tag or commit id"),
    **{key: (_positive_int, "a positive integer") for key in CONTEXT_KEYS},
    "trust_remote_code": (_bool, "true or false"),
    "use_kernels": (_bool, "true or false"),
}


def model_kwargs_problems(kwargs: Mapping[str, Any] | None, allowed: bool | None) -> list[str]:
    """Why each argument of ``kwargs`` may not go to ``from_pretrained`` under the remote-code permission
    ``allowed`` (None: library use, nothing refused); empty when all may."""
    if allowed is None or not kwargs:
        return []
    remote = asked_for(kwargs)  # judged by engine.permissions.remote_code: allowed with the operator's permission
    refused = remote_code_problem(kwargs, allowed) if remote else None
    problems = [refused] if refused else []
    for name, value in kwargs.items():
        if name in remote:
            continue
        if name not in ALLOWED:
            problems.append(f"{name!r} is not a from_pretrained argument a run config may pass; allowed: "
                            f"{', '.join(ALLOWED)} (see docs/engine.md)")
            continue
        accepts, what = ALLOWED[name]
        if not accepts(value):
            problems.append(f"{name}={value!r} is not allowed; {name} may be {what}")
    return problems


def check_model_kwargs(kwargs: Mapping[str, Any] | None, allowed: bool | None) -> None:
    """Raise :class:`ModelKwargsRefused` naming every argument of ``kwargs`` that may not be passed."""
    problems = model_kwargs_problems(kwargs, allowed)
    if problems:
        raise ModelKwargsRefused("; ".join(problems))


__all__ = ["ALLOWED", "CONTEXT_KEYS", "DTYPES", "ModelKwargsRefused", "check_model_kwargs", "model_kwargs_problems"]
