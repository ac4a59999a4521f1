"""CoMLRL's ``comlrl.utils.model_loading``: model sources, names and ``from_pretrained`` arguments."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def resolve_model_kwargs(model_config: Any, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """``from_pretrained`` dtype and attention arguments from ``model_config`` (``overrides`` first);
    attention defaults to ``"sdpa"``, an explicit ``attn_implementation=None`` keeps the model's."""
    config = model_config if isinstance(model_config, dict) else {}
    overrides = overrides if isinstance(overrides, dict) else {}
    dtype = overrides.get("torch_dtype") or overrides.get("dtype") or config.get("torch_dtype") or config.get("dtype")
    nested = config.get("model_kwargs")
    if "attn_implementation" in overrides:
        attention = overrides["attn_implementation"]
    elif "attn_implementation" in config:
        attention = config["attn_implementation"]
    elif isinstance(nested, dict) and "attn_implementation" in nested:
        attention = nested["attn_implementation"]
    else:
        attention = "sdpa"
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["torch_dtype"] = dtype
    if attention is not None:
        kwargs["attn_implementation"] = attention
    return kwargs


def freeze_model(model: Any) -> Any:
    """``model`` in eval mode with gradients off."""
    model.eval()
    for param in model.parameters():
        param.requires_grad = False
    return model


def infer_model_name(source: Any) -> str | None:
    """CoMLRL's name of a model source: an id as given; for a model object its config's model type or
    path, else its class name."""
    if source is None:
        return None
    if isinstance(source, str):
        return source
    base_model = getattr(source, "base_model", None)
    if base_model is not None and hasattr(base_model, "config"):
        name = getattr(base_model.config, "model_type", None) or getattr(base_model.config, "_name_or_path", None)
        if name:
            return str(name)
    base = getattr(source, "model", None) or base_model or source
    model_config = getattr(base, "config", None)
    if model_config is not None:
        name = getattr(model_config, "_name_or_path", None) or getattr(model_config, "model_type", None)
        if name:
            return str(name)
    return type(base).__name__


def resolve_model_sources(*, kind: str, model: Any, models: Sequence[Any] | None, expected_count: int,
                          expected_label: str | None = None, model_label: str = "model") -> tuple[list[Any], str | None]:
    """One source per agent (or critic) and the first one's name, with CoMLRL's checks and messages:
    ``model`` for everyone, or ``models`` (with ``model`` as well only when they name the same model)."""
    label = expected_label or f"num_agents ({expected_count})"
    if model is not None and models is not None:
        if isinstance(models, str | bytes) or not isinstance(models, Sequence):
            raise ValueError(f"Cannot provide both {model_label} and {kind} unless {kind} is a list of {label} "
                             f"model names.")
        if len(models) != expected_count:
            raise ValueError(f"{kind} length ({len(models)}) must match {label}.")
        name, names = infer_model_name(model), [infer_model_name(m) for m in models]
        if name is None or any(n is None for n in names):
            raise ValueError(f"Cannot verify consistency between {model_label} and {kind}; provide model names "
                             f"or omit one.")
        if any(n != name for n in names):
            raise ValueError(f"{model_label} and {kind} conflict: {name} != {names}.")
    if model is None and models is None:
        raise ValueError(f"Either {model_label} or {kind} must be provided.")
    if expected_count < 1:
        raise ValueError("expected_count must be >= 1.")
    if models is not None:
        if isinstance(models, str | bytes) or not isinstance(models, Sequence):
            raise ValueError(f"{kind} must be a non-empty sequence.")
        sources = list(models)
        if len(sources) != expected_count:
            raise ValueError(f"{kind} length ({len(sources)}) must match {label}.")
    else:
        sources = [model] * expected_count
    if any(source is None for source in sources):
        raise ValueError(f"{kind} entries must be non-null.")
    return sources, infer_model_name(sources[0]) if sources else None
