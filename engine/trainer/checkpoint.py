"""Checkpoints: a trainer's state in a folder, written atomically, and the best checkpoint by an evaluation metric.

Trainer state: in memory (``state_dict``) and on disk (atomic checkpoint folders).

A checkpoint folder holds ``model_{u}.safetensors`` per distinct model (shared weights are saved
once; a LoRA agent's file holds its adapter only, :mod:`engine.lora.weights`), ``trainer_state.pt`` (optimizers, counters, every RNG state) and ``meta.json``. It is written
under a temporary name and renamed into place, so a crash never leaves a half-written checkpoint; a
write that fails removes its temporary folder (so a full disk is not left full) and raises
:class:`CheckpointWriteError` naming the folder, the cause and the free space when the cause is the
filesystem (no space, quota, permissions).
The data position needs no storing: the items of step s are a pure function of s and the seed.

The best checkpoint by an evaluation metric (``best_checkpoint_metric``, ``best_checkpoint_mode``).

After each evaluation during training, the weights just evaluated are saved to
``<checkpoint root>/best/`` when their value of the metric beats the best so far; ``best.json``
beside it records the step, the metric, the value and the direction. The folder is not one of the
rolling ``checkpoint-<step>`` folders, so ``checkpoint_total_limit`` never prunes it. A resumed run
starts from the best of the attempt it resumes (the folder and its record are copied into the new
attempt's checkpoint root when that root is another folder), so the best is never lost or
forgotten across attempts.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from engine.lora.weights import (
    checkpoint_weights,
    load_checkpoint_weights,
    load_weights_file,
    save_weights_file,
)
from engine.schema.comparator_checkpoint import META_FILE, STATE_FILE  # noqa: F401 (re-exported)
from engine.schema.folders import CheckpointWriteError, atomic_folder, atomic_text, written_folder  # noqa: F401  (the error is re-exported)


def _numpy_state() -> list[Any]:
    name, keys, pos, has_gauss, cached = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
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


def training_state(agents: list[Any], *, step: int, env_step: int, update_rngs: list[random.Random],
                   report_rng: random.Random) -> dict[str, Any]:
    """What continues a team's training exactly besides its weights: the counters, every optimizer
    and sampling generator, the update and report RNGs, and the process-wide RNGs."""
    state: dict[str, Any] = {
        "step": step,
        "env_step": env_step,
        "num_agents": len(agents),
        "optimizers": [agent.optimizer.state_dict() for agent in agents],
        "generators": [agent.generator.get_state() for agent in agents],
        "update_rngs": [_rng_to_lists(r.getstate()) for r in update_rngs],
        "report_rng": _rng_to_lists(report_rng.getstate()),
        "python_rng": _rng_to_lists(random.getstate()),
        "numpy_rng": _numpy_state(),
        "torch_rng": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    return state


def restore_training_state(state: dict[str, Any], agents: list[Any], update_rngs: list[random.Random],
                           report_rng: random.Random) -> tuple[int, int]:
    """Put a :func:`training_state` back (optimizers, generators, RNGs); returns its ``(step, env_step)``."""
    if state["num_agents"] != len(agents):
        raise ValueError(f"checkpoint has {state['num_agents']} agents, this trainer {len(agents)}")
    for agent, opt_state, gen_state in zip(agents, state["optimizers"], state["generators"], strict=True):
        agent.optimizer.load_state_dict(opt_state)
        agent.generator.set_state(gen_state)
    for rng, s in zip(update_rngs, state["update_rngs"], strict=True):
        rng.setstate((s[0], tuple(s[1]), s[2]))
    s = state["report_rng"]
    report_rng.setstate((s[0], tuple(s[1]), s[2]))
    s = state["python_rng"]
    random.setstate((s[0], tuple(s[1]), s[2]))
    _set_numpy_state(state["numpy_rng"])
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return int(state["step"]), int(state["env_step"])


def with_weights(state: dict[str, Any], agents: list[Any]) -> dict[str, Any]:
    """A training state plus the team's weights, each distinct model once (a trainer's ``state_dict``)."""
    models, which = model_groups([agent.model for agent in agents])
    return {**state, "models": [checkpoint_weights(m) for m in models], "model_of_agent": which}


def load_weights(state: dict[str, Any], agents: list[Any]) -> None:
    """The weights of a :func:`with_weights` state into the agents' models (the same weight sharing)."""
    models, which = model_groups([agent.model for agent in agents])
    if which != list(state["model_of_agent"]):
        raise ValueError("the checkpoint's weight sharing differs from this trainer's agents")
    for model, weights in zip(models, state["models"], strict=True):
        load_checkpoint_weights(model, weights)


def write_checkpoint(path: str | Path, agents: list[Any], state: dict[str, Any], meta: dict[str, Any]) -> Path:
    """A checkpoint folder, written atomically (temporary folder, then rename): the weights, the
    training ``state`` and ``meta`` (``step``, ``env_step``, ...) with the weight sharing added. Returns
    its path."""
    with atomic_folder(path, "checkpoint") as tmp:
        models, which = model_groups([agent.model for agent in agents])
        for u, model in enumerate(models):
            save_weights_file(model, tmp / f"model_{u}.safetensors")
        torch.save(state, tmp / STATE_FILE)
        meta = {"step": meta["step"], "env_step": meta["env_step"], "model_of_agent": which, **meta}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    return Path(path)


def read_checkpoint(path: str | Path, agents: list[Any]) -> tuple[Path, dict[str, Any]]:
    """A folder written by :func:`write_checkpoint`: its weights into the agents' models (the same
    weight sharing); returns the folder and its training state."""
    folder = written_folder(path, STATE_FILE, "a checkpoint")
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    models, which = model_groups([agent.model for agent in agents])
    if which != meta["model_of_agent"]:
        raise ValueError("the checkpoint's weight sharing differs from this trainer's agents")
    for u, model in enumerate(models):
        load_weights_file(model, folder / f"model_{u}.safetensors")
    return folder, torch.load(folder / STATE_FILE, weights_only=True)


# -- The best checkpoint by an evaluation metric (``best_checkpoint_metric``, ``best_checkpoint_mode``) ------
BEST_FOLDER = "best"
RECORD_FILE = "best.json"
MODES = ("max", "min")


class BestMetricMissing(ValueError):
    """The evaluation did not report the metric the best checkpoint is chosen by."""


def improves(value: float, best: float | None, mode: str) -> bool:
    """Whether ``value`` beats ``best`` (None: nothing yet) in direction ``mode``; NaN never does, ties don't."""
    if mode not in MODES:
        raise ValueError(f"best_checkpoint_mode must be one of {MODES}, got {mode!r}")
    if math.isnan(value):
        return False
    if best is None:
        return True
    return value > best if mode == "max" else value < best


def read_record(root: Path) -> dict[str, Any] | None:
    """The ``best.json`` record under a checkpoint root (None when there is no best checkpoint)."""
    path = Path(root) / RECORD_FILE
    if not path.is_file() or not (Path(root) / BEST_FOLDER).is_dir():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass
class BestCheckpoint:
    """Keeps ``<root>/best`` at the best value of ``metric`` seen so far (see the module docstring)."""

    metric: str
    mode: str
    root: Path
    step: int | None = None
    value: float | None = None

    @classmethod
    def restored(cls, metric: str, mode: str, root: Path, earlier_root: Path | None = None) -> BestCheckpoint:
        """The tracker for ``root``, starting from the best already recorded there or, for a resumed
        run writing to a new root, from the earlier attempt's best (copied into ``root``)."""
        root = Path(root)
        record = read_record(root)
        if record is None and earlier_root is not None and Path(earlier_root).resolve() != root.resolve():
            earlier = read_record(Path(earlier_root))
            if earlier is not None and earlier.get("metric") == metric:
                with atomic_folder(root / BEST_FOLDER, "best checkpoint") as tmp:
                    shutil.copytree(Path(earlier_root) / BEST_FOLDER, tmp, dirs_exist_ok=True)
                atomic_text(root / RECORD_FILE, json.dumps(earlier, indent=2), "best checkpoint record")
                record = earlier
        tracker = cls(metric, mode, root)
        if record is not None and record.get("metric") == metric and record.get("mode") == mode:
            tracker.step, tracker.value = int(record["step"]), float(record["value"])
        return tracker

    def offer(self, owner: Any, step: int, metrics: dict[str, float]) -> bool:
        """After an evaluation at ``step``: save ``owner``'s checkpoint as the best when ``metrics``
        beat it. Raises :class:`BestMetricMissing` naming the metrics there are when it is absent."""
        if self.metric not in metrics:
            reported = ", ".join(sorted(k for k in metrics if k.startswith("eval/"))) or "none"
            raise BestMetricMissing(f"best_checkpoint_metric {self.metric!r} is not among this task's evaluation "
                                    f"metrics ({reported}); set best_checkpoint_metric to one of them")
        value = float(metrics[self.metric])
        if not improves(value, self.value, self.mode):
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        owner.save_checkpoint(self.root / BEST_FOLDER)
        self.step, self.value = step, value
        record = {"step": step, "metric": self.metric, "value": value, "mode": self.mode}
        atomic_text(self.root / RECORD_FILE, json.dumps(record, indent=2), "best checkpoint record")
        return True
