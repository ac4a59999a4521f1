"""Model sources for agents: HF ids, local folders, model objects and built-in offline models.

``load_agent(source, ...)`` returns ``(model, tokenizer)``; ``engine.models.tiny.build_tiny_model``
builds a tiny random Llama/Qwen2/GPT-2 with an in-process tokenizer.
"""

from engine.models.errors import ModelLoadError
from engine.models.loading import builtin_sources, finalize_tokenizer, load_agent, resolve_dtype
from engine.models.tiny import build_tiny_model

__all__ = [
    "ModelLoadError",
    "build_tiny_model",
    "builtin_sources",
    "finalize_tokenizer",
    "load_agent",
    "resolve_dtype",
]
