"""Trainer state: in memory (``state_dict``) and on disk (atomic checkpoint folders).

A checkpoint folder holds ``model_{u}.safetensors`` per distinct model (shared weights are saved
once), ``trainer_state.pt`` (optimizers, counters, every RNG state) and ``meta.json``. It is written
under a temporary name and renamed into place, so a crash never leaves a half-written checkpoint; a
write that fails removes its temporary folder (so a full disk is not left full) and raises
:class:`CheckpointWriteError` naming the folder, the cause and the free space when the cause is the
filesystem (no space, quota, permissions).
The data position needs no storing: the items of step s are a pure function of s and the seed.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model

STATE_FILE = "trainer_state.pt"
META_FILE = "meta.json"


_FILESYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS})
_NEARLY_FULL_BYTES = 1 << 20
"""A write that fails without an errno (torch's zip writer reports only ``unexpected pos`` or
``file write failed``) is taken for a full disk when less than this is left."""


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


class CheckpointWriteError(OSError):
    """A checkpoint could not be written because of its filesystem; nothing of it was left behind.

    ``errno`` is the cause (``ENOSPC``, ``EDQUOT``, ``EACCES``, ...), ``path`` the checkpoint folder,
    ``free_bytes``/``total_bytes`` the space of its filesystem when the write failed (None if unknown).
    ``str()`` is one line, e.g. ``no space left on device writing checkpoint /d/checkpoint-3 (0 B free
    of 5.0 MiB when the write failed)``."""

    def __init__(self, code: int, path: str | Path, free_bytes: int | None, total_bytes: int | None) -> None:
        super().__init__(code, os.strerror(code), str(path))
        self.path = str(path)
        self.free_bytes = free_bytes
        self.total_bytes = total_bytes

    def __str__(self) -> str:
        space = ""
        if self.free_bytes is not None and self.total_bytes is not None:
            space = f" ({_size(self.free_bytes)} free of {_size(self.total_bytes)} when the write failed)"
        return f"{os.strerror(self.errno or 0).lower()} writing checkpoint {self.path}{space}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errno, self.path, self.free_bytes, self.total_bytes))


def _errno_in_text(message: str) -> int | None:
    """The errno a library error quotes without being an OSError (safetensors: ``No space left on
    device (os error 28)``), when it is a filesystem one."""
    found = re.search(r"\(os error (\d+)\)", message)
    if found and int(found.group(1)) in _FILESYSTEM_ERRNOS:
        return int(found.group(1))
    for code in _FILESYSTEM_ERRNOS:
        if os.strerror(code) in message:
            return code
    return None


def _write_error(exc: BaseException, final: Path) -> BaseException:
    """What a failed checkpoint write raises: a :class:`CheckpointWriteError` when the filesystem is
    the cause (an errno that says so, or no errno and a nearly full disk), else ``exc`` itself."""
    if not isinstance(exc, Exception):
        return exc  # KeyboardInterrupt, SystemExit: not a write failure
    try:
        usage = shutil.disk_usage(final.parent)
        free, total = usage.free, usage.total
    except OSError:
        free = total = None
    code = exc.errno if isinstance(exc, OSError) else _errno_in_text(str(exc))
    if code in _FILESYSTEM_ERRNOS:
        return CheckpointWriteError(code, final, free, total)
    if code is None and free is not None and free < _NEARLY_FULL_BYTES:
        return CheckpointWriteError(errno.ENOSPC, final, free, total)
    return exc


def _numpy_state() -> list[Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]


def _set_numpy_state(state: list[Any]) -> None:
    name, keys, pos, has_gauss, cached = state
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def _rng_to_lists(state: tuple) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]


class CheckpointMixin:
    """``state_dict``/``load_state_dict`` and ``save_checkpoint``/``load_checkpoint``."""

    def _model_groups(self) -> tuple[list[Any], list[int]]:
        """Distinct model objects and, per agent, the index of its model."""
        models: list[Any] = []
        which: list[int] = []
        for agent in self.agents:
            for u, m in enumerate(models):
                if m is agent.model:
                    which.append(u)
                    break
            else:
                models.append(agent.model)
                which.append(len(models) - 1)
        return models, which

    def _training_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "step": self.step,
            "env_step": self.env_step,
            "num_agents": self.num_agents,
            "optimizers": [agent.optimizer.state_dict() for agent in self.agents],
            "generators": [agent.generator.get_state() for agent in self.agents],
            "update_rngs": [_rng_to_lists(r.getstate()) for r in self._update_rngs],
            "report_rng": _rng_to_lists(self._report_rng.getstate()),
            "python_rng": _rng_to_lists(random.getstate()),
            "numpy_rng": _numpy_state(),
            "torch_rng": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
        return state

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        if state["num_agents"] != self.num_agents:
            raise ValueError(f"checkpoint has {state['num_agents']} agents, this trainer {self.num_agents}")
        self.step = int(state["step"])
        self.env_step = int(state["env_step"])
        for agent, opt_state, gen_state in zip(self.agents, state["optimizers"], state["generators"], strict=True):
            agent.optimizer.load_state_dict(opt_state)
            agent.generator.set_state(gen_state)
        for rng, s in zip(self._update_rngs, state["update_rngs"], strict=True):
            rng.setstate((s[0], tuple(s[1]), s[2]))
        s = state["report_rng"]
        self._report_rng.setstate((s[0], tuple(s[1]), s[2]))
        s = state["python_rng"]
        random.setstate((s[0], tuple(s[1]), s[2]))
        _set_numpy_state(state["numpy_rng"])
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: model weights, optimizers, counters, RNG states."""
        models, which = self._model_groups()
        state = self._training_state()
        state["models"] = [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in models]
        state["model_of_agent"] = which
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        models, which = self._model_groups()
        if which != list(state["model_of_agent"]):
            raise ValueError("the checkpoint's weight sharing differs from this trainer's agents")
        for model, weights in zip(models, state["models"], strict=True):
            model.load_state_dict(weights)
        self._restore_training_state(state)

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint folder atomically (temporary folder, then rename). Returns its path."""
        final = Path(path)
        tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            models, which = self._model_groups()
            for u, model in enumerate(models):
                save_model(model, str(tmp / f"model_{u}.safetensors"))
            torch.save(self._training_state(), tmp / STATE_FILE)
            meta = {"step": self.step, "env_step": self.env_step, "model_of_agent": which,
                    "agent_names": self.agent_names, "config": self.args.to_dict()}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
            if final.exists():  # an older folder of the same step: moved aside, replaced, then removed
                old = final.parent / f".old-{final.name}-{os.getpid()}"
                shutil.rmtree(old, ignore_errors=True)
                os.replace(final, old)
                os.replace(tmp, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, final)
        except BaseException as exc:
            error = _write_error(exc, final)  # the free space as it was when the write failed
            shutil.rmtree(tmp, ignore_errors=True)
            if error is exc:
                raise
            raise error from exc
        return final

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore a folder written by :meth:`save_checkpoint` into this (identically built) trainer."""
        folder = Path(path)
        if not (folder / STATE_FILE).is_file():
            raise FileNotFoundError(f"{folder} is not a checkpoint (no {STATE_FILE}); pass a checkpoint-N folder")
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        models, which = self._model_groups()
        if which != meta["model_of_agent"]:
            raise ValueError("the checkpoint's weight sharing differs from this trainer's agents")
        for u, model in enumerate(models):
            device = next(model.parameters()).device
            load_model(model, str(folder / f"model_{u}.safetensors"), device=str(device))
        self._restore_training_state(torch.load(folder / STATE_FILE, weights_only=True))
        self.last_checkpoint = str(folder)
