"""Which python runs the vLLM rollout server: an operator's choice, never a run config's.

``rollout_backend: vllm`` starts :mod:`engine.sampling.vllm_server` with the python of the vLLM venv
(``scripts/install_vllm.sh``). Whatever that path names runs as the worker's user, so a run config
(stored from a dashboard, run by a worker) may not name it: the run-config schema has no
``vllm_python`` field, and the operator sets ``COOPLAB_VLLM_PYTHON`` (read in ``jobs.settings`` and handed
to :func:`set_vllm_python`; the engine reads no environment). A process that applied it uses the
operator's python whatever a config says (:func:`chosen_vllm_python`); a script using the engine as a
library (no operator settings applied) keeps its own ``MAGRPOConfig(vllm_python=...)``. Torch-free.
"""

from __future__ import annotations

from pathlib import Path

SETTING = "COOPLAB_VLLM_PYTHON"
DEFAULT_VLLM_PYTHON = ".venv-vllm/bin/python"
ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = "run scripts/install_vllm.sh (it installs vLLM into .venv-vllm)"

_operator: str | None = None


class VLLMBackendError(RuntimeError):
    """The vLLM rollout server is missing, failed to start, or failed a request."""


def set_vllm_python(value: str | None) -> str | None:
    """Set the operator's vLLM python (None: no operator setting applied, library use); returns the
    previous value so a caller can restore it."""
    global _operator
    previous, _operator = _operator, None if value is None else str(value)
    return previous


def vllm_python_override() -> str | None:
    """The operator's vLLM python in this process (None when no operator settings were applied)."""
    return _operator


def chosen_vllm_python(config_value: str) -> str:
    """The python to start the server with: the operator's where one was applied, else ``config_value``
    (a library config's own ``vllm_python``)."""
    return _operator if _operator is not None else config_value


def resolve_vllm_python(setting: str) -> Path:
    """The vLLM venv's python that ``setting`` names: as given when absolute, else under the working
    folder, else under the project root. A clear error, naming where the value came from, when it is
    not there."""
    path = Path(setting).expanduser()
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, ROOT / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = " or ".join(str(c) for c in candidates)
    if _operator is not None and setting == _operator:
        where, fix = f"the operator setting {SETTING}={setting!r}", f"or set {SETTING} to its python"
    else:
        where, fix = f"setting vllm_python={setting!r}", "or set vllm_python to its python"
    raise VLLMBackendError(f"rollout_backend: vllm needs the vLLM venv's python ({where}), which is not at "
                           f"{tried}: {INSTALL_HINT}, {fix}, or use rollout_backend: hf")


__all__ = ["DEFAULT_VLLM_PYTHON", "SETTING", "VLLMBackendError", "chosen_vllm_python", "resolve_vllm_python",
           "set_vllm_python", "vllm_python_override"]
