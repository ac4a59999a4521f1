"""Trainer state: in memory (``state_dict``) and on disk (atomic checkpoint folders).

A checkpoint folder holds ``model_{u}.safetensors`` per distinct model (shared weights are saved
once; a LoRA agent's file holds its adapter only, :mod:`engine.lora.weights`), ``trainer_state.pt`` (optimizers, counters, every RNG state) and ``meta.json``. It is written
under a temporary name and renamed into place, so a crash never leaves a half-written checkpoint; a
write that fails removes its temporary folder (so a full disk is not left full) and raises
:class:`CheckpointWriteError` naming the folder, the cause and the free space when the cause is the
filesystem (no space, quota, permissions).
The data position needs no storing: the items of step s are a pure function of s and the seed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.lora.weights import (
    checkpoint_weights,
    load_checkpoint_weights,
    load_weights_file,
    save_weights_file,
)
from engine.schema.comparator_checkpoint import META_FILE, STATE_FILE  # noqa: F401 (re-exported)
from engine.schema.folders import CheckpointWriteError, atomic_folder, written_folder  # noqa: F401  (the error is re-exported)


def _numpy_state() -> list[Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]


def _set_numpy_state(state: list[Any]) -> None:
    name, keys, pos, has_gauss, cached = state
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def _rng_to_lists(state: tuple) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def model_groups(models: list[Any]) -> tuple[list[Any], list[int]]:
    """The distinct model objects of a team (agents sharing weights hold the same one) and, per agent,
    the index of its model: the ``model_{u}.safetensors`` files and ``model_of_agent`` of a checkpoint."""
    distinct: list[Any] = []
    which: list[int] = []
    for model in models:
        for u, m in enumerate(distinct):
            if m is model:
                which.append(u)
                break
        else:
            distinct.append(model)
            which.append(len(distinct) - 1)
    return distinct, which


class CheckpointMismatch(ValueError):
    """A checkpoint folder that does not fit a team: unreadable, another team size or weight sharing."""


def load_team_weights(agents: list[Any], folder: Path) -> int:
    """The model weights of a checkpoint folder into the agents' models (no optimizer or RNG state);
    the checkpoint's step. :class:`CheckpointMismatch` names what does not fit."""
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointMismatch(f"checkpoint {folder}: cannot read {META_FILE} ({exc}); is it a checkpoint "
                                 "folder?") from None
    saved = list(meta.get("model_of_agent") or [])
    models, which = model_groups([agent.model for agent in agents])
    if len(saved) != len(which):
        raise CheckpointMismatch(f"checkpoint {folder} holds a team of {len(saved)} agents, the run config "
                                 f"{len(which)}; evaluate it with the run config it was trained with")
    if saved != which:
        raise CheckpointMismatch(f"checkpoint {folder}: its weight sharing {saved} differs from the run config's "
                                 f"{which}; evaluate it with the run config it was trained with")
    for u, model in enumerate(models):
        load_weights_file(model, folder / f"model_{u}.safetensors")
    return int(meta.get("step", 0))


class CheckpointMixin:
    """``state_dict``/``load_state_dict`` and ``save_checkpoint``/``load_checkpoint``."""

    def _model_groups(self) -> tuple[list[Any], list[int]]:
        """Distinct model objects and, per agent, the index of its model."""
        return model_groups([agent.model for agent in self.agents])

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
        state["models"] = [checkpoint_weights(m) for m in models]
        state["model_of_agent"] = which
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        models, which = self._model_groups()
        if which != list(state["model_of_agent"]):
            raise ValueError("the checkpoint's weight sharing differs from this trainer's agents")
        for model, weights in zip(models, state["models"], strict=True):
            load_checkpoint_weights(model, weights)
        self._restore_training_state(state)

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint folder atomically (temporary folder, then rename). Returns its path."""
        with atomic_folder(path, "checkpoint") as tmp:
            models, which = self._model_groups()
            for u, model in enumerate(models):
                save_weights_file(model, tmp / f"model_{u}.safetensors")
            torch.save(self._training_state(), tmp / STATE_FILE)
            meta = {"step": self.step, "env_step": self.env_step, "model_of_agent": which,
                    "agent_names": self.agent_names, "config": self.args.to_dict()}
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
        return Path(path)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore a folder written by :meth:`save_checkpoint` into this (identically built) trainer."""
        folder = written_folder(path, STATE_FILE, "a checkpoint")
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        models, which = self._model_groups()
        if which != meta["model_of_agent"]:
            raise ValueError("the checkpoint's weight sharing differs from this trainer's agents")
        for u, model in enumerate(models):
            load_weights_file(model, folder / f"model_{u}.safetensors")
        self._restore_training_state(torch.load(folder / STATE_FILE, weights_only=True))
        self.last_checkpoint = str(folder)
