"""The best checkpoint by an evaluation metric (``best_checkpoint_metric``, ``best_checkpoint_mode``).

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
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.schema.folders import atomic_folder, atomic_text

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
