"""Which python runs the vLLM rollout server: an operator's choice, never a run config's.

``rollout_backend: vllm`` starts :mod:`engine.sampling.vllm_server` with the python of the vLLM venv
(``scripts/install_vllm.sh``). Whatever that path names runs as the worker's user, so a run config
(stored from a dashboard, run by a worker) may not name it: the run-config schema has no
``vllm_python`` field, and the operator sets ``COOPLAB_VLLM_PYTHON`` (read in ``jobs.settings`` and passed
as ``vllm_python`` of :class:`engine.permissions.operator.OperatorPermissions`; the engine reads no environment).
A run built with it uses the operator's python whatever a config says
(:meth:`engine.permissions.operator.OperatorPermissions.configure`); a script using the engine as a library (no
operator settings applied) keeps its own ``MAGRPOConfig(vllm_python=...)``. Torch-free.
"""

from __future__ import annotations

from pathlib import Path

SETTING = "COOPLAB_VLLM_PYTHON"
DEFAULT_VLLM_PYTHON = ".venv-vllm/bin/python"
ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = "run scripts/install_vllm.sh (it installs vLLM into .venv-vllm)"

class VLLMBackendError(RuntimeError):
    """The vLLM rollout server is missing, failed to start, or failed a request."""


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
    where = (f"vllm_python={setting!r}: the operator setting {SETTING}={setting!r} in a CoopLab run, a library "
             f"config's own setting otherwise")
    fix = f"or set {SETTING} (a library config: vllm_python) to its python"
    raise VLLMBackendError(f"rollout_backend: vllm needs the vLLM venv's python ({where}), which is not at "
                           f"{tried}: {INSTALL_HINT}, {fix}, or use rollout_backend: hf")


__all__ = ["DEFAULT_VLLM_PYTHON", "SETTING", "VLLMBackendError", "resolve_vllm_python"]
