"""CoMLRL's ``comlrl.utils.tokenizer_utils``: tokenizers with a pad token, one per agent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def ensure_pad_token(tokenizer: Any) -> Any:
    """``tokenizer`` with a pad token (its eos when it has none)."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.pad_token_id is None:
        raise ValueError("Tokenizer must expose pad_token_id.")
    return tokenizer


def ensure_tokenizer(model: Any, tokenizer: Any) -> Any:
    """``tokenizer``, or the one of the model id ``model``."""
    if tokenizer is None:
        if model is None or not isinstance(model, str):
            raise ValueError("Tokenizer must be provided when model is a PreTrainedModel instance.")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model)
    return ensure_pad_token(tokenizer)


def _is_sequence(tokenizer: Any) -> bool:
    return isinstance(tokenizer, Sequence) and not isinstance(tokenizer, str | bytes) and not hasattr(tokenizer,
                                                                                                      "pad_token")


def resolve_tokenizers(model: Any, tokenizer: Any, agents: Sequence[Any] | None) -> Any:
    """One tokenizer for everyone, or a list of one per agent (loaded from model ids when not given)."""
    if agents is None:
        if tokenizer is not None and not _is_sequence(tokenizer):
            return ensure_pad_token(tokenizer)
        return ensure_tokenizer(model, None)
    if tokenizer is None:
        if all(isinstance(source, str) for source in agents):
            return [ensure_tokenizer(name, None) for name in agents]
        raise ValueError("Tokenizer(s) must be provided when agents are model objects.")
    if _is_sequence(tokenizer):
        if len(tokenizer) != len(agents):
            raise ValueError("tokenizers length must match agents.")
        return [ensure_pad_token(t) for t in tokenizer]
    return ensure_pad_token(tokenizer)


def apply_tokenizer_specials(tokenizer: Any, models: Sequence[Any]) -> None:
    """Set the tokenizer's pad and eos ids on every model's config."""
    tokenizer = ensure_pad_token(tokenizer)
    pad_id = tokenizer.pad_token_id
    eos_id = tokenizer.eos_token_id or pad_id
    for model in models:
        if model is None:
            continue
        config = model.model.config if hasattr(model, "model") and hasattr(model.model, "config") else \
            getattr(model, "config", None)
        if config is not None:
            config.pad_token_id = pad_id
            config.eos_token_id = eos_id
