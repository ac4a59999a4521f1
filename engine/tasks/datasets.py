"""Turning a dataset source into a Hugging Face ``Dataset`` of item dicts.

A source is a plain list of dicts, a ``Dataset`` already, a local ``.json``/``.jsonl``/``.csv``/
``.parquet`` file, or a hub name (``org/name``, optionally ``org/name:split``) when online. Inside a run
that confines its reads (:mod:`engine.permissions.read_paths`) a file must lie in a read root.
``datasets`` is imported inside the functions so importing :mod:`engine.tasks` stays light.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.permissions.read_paths import ReadPathError, checked_read, names_local_path
from engine.tasks.base import Task, TaskError

_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}


def items_to_dataset(items: Sequence[dict[str, Any]]) -> Any:
    """A ``datasets.Dataset`` holding ``items`` (a list of dicts with the same keys)."""
    from datasets import Dataset

    items = list(items)
    if not items:
        raise TaskError("a dataset needs at least one item; the list is empty")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise TaskError(f"dataset item {index} is {type(item).__name__}; items must be dicts")
    return Dataset.from_list(items)


def task_from_items(train: Sequence[dict[str, Any]], evals: Sequence[dict[str, Any]], **parts: Any) -> Task:
    """A :class:`Task` over these items (no eval dataset without eval items); ``parts`` are the task's
    other fields (name, roles, formatters, reward_func, ...)."""
    return Task(train_dataset=items_to_dataset(train), eval_dataset=items_to_dataset(evals) if evals else None,
                **parts)


def load_items(source: Any, *, split: str = "train") -> Any:
    """Load ``source`` as a ``datasets.Dataset``; raise :class:`TaskError` naming the source on failure."""
    from datasets import Dataset, DatasetDict

    if isinstance(source, Dataset):
        return source
    if isinstance(source, DatasetDict):
        if split not in source:
            raise TaskError(f"dataset has no split {split!r}; splits: {sorted(source)}")
        return source[split]
    if isinstance(source, (list, tuple)):
        return items_to_dataset(source)
    if not isinstance(source, (str, Path)):
        raise TaskError(
            f"cannot load a dataset from {type(source).__name__}; give a list of dicts, a file path "
            "(.json/.jsonl/.csv/.parquet) or a hub name"
        )
    text = str(source)
    try:  # where a run confines its reads (engine.permissions.read_paths): the resolved path, checked
        text = checked_read("dataset", text, dataset=True)
    except ReadPathError as exc:
        raise TaskError(str(exc)) from None
    path = Path(text).expanduser()
    suffix = path.suffix.lower()
    if suffix in _FILE_BUILDERS or path.exists():
        return _load_file(path, suffix)
    return _load_hub(text, split)


def _load_file(path: Path, suffix: str) -> Any:
    from datasets import load_dataset

    if not path.is_file():
        raise TaskError(f"dataset file not found: {path}")
    builder = _FILE_BUILDERS.get(suffix)
    if builder is None:
        known = ", ".join(sorted(_FILE_BUILDERS))
        raise TaskError(f"dataset file {path} has an unknown format; use one of {known}")
    try:
        return load_dataset(builder, data_files=str(path), split="train")
    except Exception as exc:  # datasets raises many types for malformed files
        raise TaskError(f"could not read dataset file {path}: {exc}") from exc


def _load_hub(name: str, split: str) -> Any:
    from datasets import load_dataset

    if ":" in name:  # name:split, the split possibly sliced (train[:1100])
        name, split = name.split(":", 1)
    try:
        return load_dataset(name, split=split)
    except Exception as exc:
        raise TaskError(
            f"could not load dataset {name!r} (split {split!r}) from the Hugging Face hub: {exc}. "
            "Offline? Point to a local .json/.jsonl/.csv/.parquet file instead."
        ) from exc


def split_items(items: Sequence[dict[str, Any]], eval_size: int) -> tuple[list[dict], list[dict]]:
    """Split a list into (train, eval) keeping the last ``eval_size`` items for evaluation. The two
    never share an item: a list too short to hold ``eval_size`` items out and still train on one is
    refused, naming both numbers and the fix."""
    items = list(items)
    if eval_size <= 0:
        return items, []
    if len(items) <= eval_size:
        raise TaskError(f"eval_items={eval_size} holds out every one of the dataset's {len(items)} items, leaving "
                        f"none to train on; set eval_items below {len(items)} (0: no evaluation split)")
    return items[:-eval_size], items[-eval_size:]


def item_key(item: Any) -> str:
    """A canonical text of a dataset item (its keys sorted), to compare items across splits."""
    return json.dumps(dict(item), sort_keys=True, default=str)


def shared_items(train: Any, evals: Any) -> list[dict]:
    """The evaluation items that also appear in the training data (equal as whole items)."""
    seen = {item_key(item) for item in train}
    return [dict(item) for item in evals if item_key(item) in seen]


@contextmanager
def _hub_offline():
    """Hugging Face reads from its local cache only, for the duration (no request leaves the machine)."""
    import datasets.config
    import huggingface_hub.constants as hub

    saved = (datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE = saved


def load_cached_items(source: str, *, task: str, param: str = "dataset") -> Any:
    """A local file as :func:`load_items` reads it, or a hub name (``name:split``) from this machine's
    Hugging Face cache only: a benchmark's default names never start a download. A name not in the
    cache is refused, naming both ways to provide it."""
    if names_local_path(source, dataset=True):
        return load_items(source)
    try:
        with _hub_offline():
            return load_items(source)
    except TaskError:
        name = source.split(":", 1)[0]
        raise TaskError(
            f"task {task!r}: {param} {source!r} is not in this machine's Hugging Face cache (CoopLab reads hub "
            f"datasets from the cache only). Download it once where the hub is reachable "
            f"(python -c \"import datasets; datasets.load_dataset('{name}')\") or point {param} at a local "
            ".jsonl/.parquet file"
        ) from None
