"""Where a run config may have the engine read files: inside the read roots the caller gives.

A run config names files and folders the trainer reads: a task's ``dataset`` file
(``task.params.dataset``), an agent's ``model`` and ``tokenizer`` folder, the models of the trainer
section (``comparator_model_name``, ``comparator_agents``, ``reward_model_name``,
``actor_critic.critic_model_name``) and ``comparator_checkpoint`` (:data:`MODEL_SETTINGS`,
:data:`FOLDER_SETTINGS`; a system's trainer overrides too). What it reads ends up in transcripts,
metrics and checkpoints every dashboard user can see, with the worker's rights: so each such path must
lie inside a read root (:class:`ReadArea`): the operator's data directory, the project's bundled data
(:data:`BUNDLED_DATA`), the Hugging Face hub cache and the folders of ``COOPLAB_DATA_ROOTS`` (the roots
come from ``jobs.settings``; the engine reads no environment). Paths are judged after resolving
``~``, symlinks and ``..``; relative ones from the working folder, as the loaders take them.

Only values that name a local path are judged (one that exists, or is written as a path: ``/``,
``./``, ``~``; a dataset with a file suffix): a built-in model (``builtin:``) or a hub id
(``org/name``) is not a path. Pre-flight lists every path outside (:func:`read_path_problems`); the
run checks them again when it starts (:func:`check_read_paths`, in ``engine.build.run.run_training``),
and the loaders once more right before reading (:func:`checked_read` inside :func:`reading_within`),
reading the resolved path they were given. Without an area (a script using the engine as a library)
paths are taken as given. Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.schema.errors import ConfigError

if TYPE_CHECKING:
    from engine.schema.run_config import TrainerSpec

SETTING = "COOPLAB_DATA_ROOTS"
BUNDLED_DATA = Path(__file__).resolve().parents[1] / "tasks" / "data"
"""The datasets the project ships (engine/tasks/data), always readable."""
MODEL_SETTINGS = ("comparator_model_name", "reward_model_name")
"""Trainer settings that name a model source (a hub id, a folder or a built-in)."""
FOLDER_SETTINGS = ("comparator_checkpoint",)
"""Trainer settings that name a folder to read."""
DATASET_PARAMS = ("dataset", "eval_dataset")
"""Task parameters that name a dataset (a file, or a hub name), for every task (eval_dataset: a held-out split)."""
_FILE_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")
_PATH_PREFIXES = ("/", "./", "../", "~", ".\\")


class ReadPathError(ConfigError):
    """A path a run config names for reading lies outside the read roots; the message names the field,
    the path and the fix."""


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.path.abspath(Path(path).expanduser())))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def names_local_path(value: str, *, dataset: bool = False) -> bool:
    """Whether ``value`` names a local path as the loaders take it: written as a path, an existing file
    or folder, or (``dataset``) a name with a dataset file's suffix."""
    if value.startswith("builtin:"):
        return False
    if value.startswith(_PATH_PREFIXES) or os.path.isabs(value) or Path(value).expanduser().exists():
        return True
    return dataset and Path(value).suffix.lower() in _FILE_SUFFIXES


@dataclass(frozen=True)
class ReadArea:
    """The folders a run may read from."""

    roots: tuple[Path, ...] = ()

    @classmethod
    def of(cls, roots: Iterable[str | os.PathLike[str]]) -> ReadArea:
        return cls(tuple(Path(r) for r in roots))

    def _allowed(self) -> list[Path]:
        return [_real(root) for root in self.roots]

    def resolve(self, field: str, value: str | os.PathLike[str]) -> Path:
        """The real path ``value`` names; :class:`ReadPathError` when it is outside every root."""
        real = _real(value)
        allowed = self._allowed()
        if any(_inside(real, root) for root in allowed):
            return real
        shown = f"{os.fspath(value)!r}" + (f" (resolves to {real})" if str(real) != os.fspath(value) else "")
        where = ", ".join(str(r) for r in allowed) or "no folder"
        raise ReadPathError(f"{field}: {shown} is outside the folders a run may read ({where}); move it into the "
                            f"data directory, or an operator adds its folder to {SETTING} (comma-separated "
                            f"absolute paths) for the dashboard and the workers")


def _sources(config: Any) -> Iterator[tuple[str, str, bool]]:
    """``(field, value, is_dataset)`` for every string ``config`` (a RunConfig) names for reading."""
    for i, agent in enumerate(config.agents):
        yield f"agents.{i}.model", agent.model, False
        if agent.tokenizer:
            yield f"agents.{i}.tokenizer", agent.tokenizer, False
    params = config.task.params if isinstance(config.task.params, Mapping) else {}
    for name in DATASET_PARAMS:
        if isinstance(params.get(name), str):
            yield f"task.params.{name}", params[name], True
    yield from _trainer_sources("trainer", _trainer_values(config.trainer))
    if config.system is not None:
        for g, group in enumerate(config.system.trainers):
            yield from _trainer_sources(f"system.trainers.{g}.trainer", dict(group.trainer))


def _trainer_values(trainer: TrainerSpec) -> dict[str, Any]:
    values = {name: getattr(trainer, name, None) for name in (*MODEL_SETTINGS, *FOLDER_SETTINGS, "comparator_agents")}
    return {**values, "actor_critic": {"critic_model_name": trainer.actor_critic.critic_model_name}}


def _trainer_sources(prefix: str, values: Mapping[str, Any]) -> Iterator[tuple[str, str, bool]]:
    for name in (*MODEL_SETTINGS, *FOLDER_SETTINGS):
        if isinstance(values.get(name), str):
            yield f"{prefix}.{name}", values[name], False
    for j, source in enumerate(values.get("comparator_agents") or []):
        if isinstance(source, str):
            yield f"{prefix}.comparator_agents.{j}", source, False
    critic = (values.get("actor_critic") or {}).get("critic_model_name")
    if isinstance(critic, str):
        yield f"{prefix}.actor_critic.critic_model_name", critic, False


def read_path_problems(config: Any, area: ReadArea, *, existing_only: bool = False) -> list[tuple[str, str]]:
    """``(field, message)`` for each path ``config`` names for reading that ``area`` refuses;
    ``existing_only`` judges only paths that exist here (pre-flight names a missing model on its own, and
    the run judges every path again where it trains)."""
    problems = []
    for field, value, dataset in _sources(config):
        if not names_local_path(value, dataset=dataset):
            continue
        if existing_only and not os.path.lexists(Path(value).expanduser()):
            continue
        try:
            area.resolve(field, value)
        except ReadPathError as exc:
            problems.append((field, str(exc).partition(": ")[2]))
    return problems


def check_read_paths(config: Any, area: ReadArea) -> None:
    """Raise :class:`ReadPathError` listing every path of ``config`` outside ``area``."""
    problems = read_path_problems(config, area)
    if problems:
        raise ReadPathError("\n".join(f"{field}: {message}" for field, message in problems))


_area: ReadArea | None = None


@contextmanager
def reading_within(area: ReadArea | None) -> Iterator[None]:
    """Confine the loaders' reads (:func:`checked_read`) to ``area`` while the block runs (None: not
    confined); the previous area comes back afterwards."""
    global _area
    previous, _area = _area, area
    try:
        yield
    finally:
        _area = previous


def current_read_area() -> ReadArea | None:
    """The area the loaders read within now (None: not confined)."""
    return _area


def checked_read(field: str, value: str, *, dataset: bool = False) -> str:
    """``value`` as a loader should read it: where reads are confined and it names a local path, its
    resolved path, checked against the area (:class:`ReadPathError` when outside); otherwise as given."""
    if _area is None or not names_local_path(value, dataset=dataset):
        return value
    return str(_area.resolve(field, value))


__all__ = ["BUNDLED_DATA", "DATASET_PARAMS", "FOLDER_SETTINGS", "MODEL_SETTINGS", "SETTING", "ReadArea",
           "ReadPathError", "check_read_paths", "checked_read", "current_read_area", "names_local_path",
           "read_path_problems", "reading_within"]
