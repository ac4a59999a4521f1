"""What a run trained with, recorded by its job when it starts: enough to reproduce it or explain a
difference between two runs.

:func:`capture_environment` returns one JSON-able dict: the code (the git commit of the CoopLab source
the job imports, its branch, whether the tree was dirty and the diff against the commit, capped at
:data:`MAX_DIFF_CHARS`, plus the names of untracked files), Python, the versions of the packages that
decide the numbers (cooplab, torch, transformers, ...), the host, platform, process and the command
line of the job process, the worker and the device. Git is asked with short timeouts; an install that is
not a git checkout records why there is no commit. The store keeps it per run
(:meth:`db.store.Store.record_run_environment`); the run page, its downloads and ``cooplab.api``
read it back.
"""

from __future__ import annotations

import os
import platform
import shlex
import socket
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

SOURCE_ROOT = Path(__file__).resolve().parents[1]
"""The folder holding the CoopLab packages the job imports (a git checkout for a development install)."""
MAX_DIFF_CHARS = 100_000
"""The longest dirty diff kept; a longer one is cut here and marked ``diff_truncated``."""
MAX_UNTRACKED = 200
PACKAGES = ("cooplab", "torch", "transformers", "peft", "accelerate", "vllm", "numpy", "pydantic", "sqlalchemy",
            "celery")
GIT_TIMEOUT_S = 10.0


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                          check=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    return done.stdout


def git_state(root: Path = SOURCE_ROOT) -> dict[str, Any]:
    """The git state of ``root``: ``commit``, ``branch``, ``dirty``, ``diff`` (``git diff HEAD``, cut at
    :data:`MAX_DIFF_CHARS`; ``diff_truncated`` says so), ``untracked`` (file names); or ``{"error": why}``
    when it is not a git checkout or git cannot be asked."""
    try:
        commit = _git(root, "rev-parse", "HEAD").strip()
        branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()
        status = _git(root, "status", "--porcelain", "--untracked-files=normal").splitlines()
        diff = _git(root, "diff", "HEAD", "--no-color", "--no-ext-diff")
    except FileNotFoundError:
        return {"error": "git is not installed on this machine"}
    except subprocess.TimeoutExpired:
        return {"error": f"git did not answer within {GIT_TIMEOUT_S:.0f} s"}
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or "").strip().splitlines()
        return {"error": f"{root} is not a git checkout ({said[0] if said else 'git failed'})"}
    untracked = [line[3:] for line in status if line.startswith("?? ")]
    return {"commit": commit, "branch": branch, "dirty": bool(status), "diff": diff[:MAX_DIFF_CHARS],
            "diff_truncated": len(diff) > MAX_DIFF_CHARS, "diff_chars": len(diff),
            "untracked": untracked[:MAX_UNTRACKED], "untracked_count": len(untracked)}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """The installed version of each of ``names`` (those not installed are left out)."""
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def _cuda() -> dict[str, Any] | None:
    """torch's CUDA build and the devices it sees, when this process has torch loaded (never imported
    or initialised here)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    info: dict[str, Any] = {"cuda_build": getattr(torch.version, "cuda", None)}
    try:
        if torch.cuda.is_initialized():
            info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # a broken driver must not stop the run from being recorded
        pass
    return info


def capture_environment(*, worker: str | None = None, device: str | None = None,
                        root: Path = SOURCE_ROOT) -> dict[str, Any]:
    """Everything the module docstring lists, as one JSON-able dict."""
    return {
        "git": {"root": str(root), **git_state(root)},
        "python": {"version": sys.version.split()[0], "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "packages": package_versions(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "pid": os.getpid(),
        "command": shlex.join(sys.argv) if sys.argv and sys.argv[0] else sys.executable,
        "worker": worker,
        "device": device,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda": _cuda(),
    }


__all__ = ["MAX_DIFF_CHARS", "capture_environment", "git_state", "package_versions"]
