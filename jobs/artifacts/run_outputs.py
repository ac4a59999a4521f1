"""What a run leaves besides its checkpoints, stored at its end under the run's keys
(:mod:`jobs.artifacts.location`):

- the exported models ``model/`` and ``model_best/`` (a LoRA agent's adapter is inside, under
  ``agent_<i>/adapter/``) as ``runs/run-<id>/exports/model`` and ``.../exports/model_best``;
- the best checkpoint ``checkpoints/best`` (with ``best.json``) as ``.../exports/best_checkpoint``;
- the preference trainers' iteration files (``policy_checkpoint_dir``, ``preference_replay_dir``,
  ``reward_distribution/``) as ``runs/run-<id>/iterations/policies``, ``.../pairs`` and
  ``.../reward_distribution``;
- the run's log file as ``runs/run-<id>/logs/run-<id>.log``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from jobs.artifacts.location import export_key, iterations_key, logs_key
from jobs.artifacts.staging import link_or_copy
from jobs.artifacts.store import ArtifactStore, Progress

log = logging.getLogger(__name__)

BEST_CHECKPOINT = "best_checkpoint"


def _folder(setting: str | None, output_dir: Path) -> Path | None:
    if not setting:
        return None
    path = Path(setting).expanduser()
    return path if path.is_absolute() else output_dir / path


def run_output_folders(run_id: int, output_dir: str | Path, trainer: Any = None) -> list[tuple[Path, str]]:
    """``(folder, key)`` of each output of the run that exists in ``output_dir`` (see the module doc);
    ``trainer`` is the run config's trainer section (its iteration file settings)."""
    out = Path(output_dir)
    found: list[tuple[Path, str]] = [(out / name, export_key(run_id, name)) for name in ("model", "model_best")]
    found.append((out / "checkpoints" / "best", export_key(run_id, BEST_CHECKPOINT)))
    iterations = iterations_key(run_id)
    found += [
        (_folder(getattr(trainer, "policy_checkpoint_dir", None), out), f"{iterations}/policies"),
        (_folder(getattr(trainer, "preference_replay_dir", None), out), f"{iterations}/pairs"),
        (out / "reward_distribution", f"{iterations}/reward_distribution"),
    ]
    return [(folder, key) for folder, key in found if folder is not None and folder.is_dir() and any(folder.iterdir())]


def store_run_outputs(store: ArtifactStore, run_id: int, output_dir: str | Path, trainer: Any = None, *,
                      progress: Progress | None = None) -> list[str]:
    """Upload the run's outputs (checked, each with its completion marker); returns their keys. The
    best checkpoint goes with its record ``best.json``. ``progress`` is called after each file stored."""
    stored = []
    for folder, key in run_output_folders(run_id, output_dir, trainer):
        if key == export_key(run_id, BEST_CHECKPOINT):
            record = folder.parent / "best.json"
            with tempfile.TemporaryDirectory(prefix=".store-best-", dir=folder.parent) as tmp:
                staged = Path(tmp) / "best"
                shutil.copytree(folder, staged / "best", copy_function=link_or_copy)
                if record.is_file():
                    link_or_copy(record, staged / "best.json")
                store.upload_folder(staged, key, progress=progress)
        else:
            store.upload_folder(folder, key, progress=progress)
        log.info("run %s: %s stored in %s/%s", run_id, folder, store.url, key)
        stored.append(key)
    return stored


def log_object_key(run_id: int) -> str:
    """The key of a run's log file in the store: ``runs/run-<id>/logs/run-<id>.log``."""
    return f"{logs_key(run_id)}/run-{int(run_id)}.log"


def store_run_log(store: ArtifactStore, run_id: int, log_path: str | Path) -> bool:
    """Upload the run's log file as ``runs/run-<id>/logs/run-<id>.log``; False when there is none."""
    path = Path(log_path)
    if not path.is_file():
        return False
    with tempfile.TemporaryDirectory(prefix=".store-log-", dir=path.parent) as tmp:
        shutil.copy2(path, Path(tmp) / path.name)  # a copy: the log may still grow
        store.upload_folder(tmp, logs_key(run_id))
    return True
