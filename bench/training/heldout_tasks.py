"""The workloads of the held-out learning bench (:mod:`bench.training.heldout`, :mod:`bench.training.heldout_comlrl`).

* ``quickstart``: the quick start's letters, held out by its ``eval_items`` topics;
* ``tldr``: CoMLRL's TLDR writing task and level reward (max 3.0) on the 20 passages CoopLab ships
  (``engine/tasks/data/writing_prompts.jsonl``), written to two files: the last ``eval_items``
  passages are the held-out file (``eval_dataset``), the others the training file, so the task's own
  check refuses any overlap. ``task_params`` may point ``dataset``/``eval_dataset`` at a user's files.

Each workload also gives the team reward CoMLRL's trainer calls (``reward(completions1, completions2)``),
the same numbers as the CoopLab task's summed reward terms.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

TASKS = ("quickstart", "tldr")
NEW_TOKENS = {"quickstart": 16, "tldr": 48}
EVAL_ITEMS = {"quickstart": 12, "tldr": 8}


def write_tldr_splits(folder: Path, eval_items: int) -> tuple[Path, Path]:
    """The shipped passages as (training file, held-out file): the last ``eval_items`` are held out."""
    from engine.tasks.datasets import split_items
    from engine.tasks.writing import shipped_prompts

    train, held_out = split_items(shipped_prompts(), eval_items)
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "tldr_train.jsonl", folder / "tldr_heldout.jsonl"
    for path, rows in zip(paths, (train, held_out), strict=True):
        path.write_text("".join(json.dumps({"prompt": r["text"], "topic": r["topic"]}) + "\n" for r in rows))
    return paths


def task_spec(task: str, *, eval_items: int, task_params: dict[str, Any], data_dir: Path) -> dict[str, Any]:
    """The run config's ``task`` section for ``task`` with ``eval_items`` held-out items."""
    if task == "quickstart":
        return {"name": "quickstart", "params": {"eval_items": eval_items, **task_params}}
    if task == "tldr":
        train, held_out = write_tldr_splits(data_dir, eval_items)
        return {"name": "tldr", "params": {"dataset": str(train), "eval_dataset": str(held_out), **task_params}}
    raise ValueError(f"--task {task!r}: choose one of {', '.join(TASKS)}")


def comlrl_reward(task: str, params: dict[str, Any]) -> Callable[[list[str], list[str]], list[float]]:
    """The team reward of ``task`` as CoMLRL's trainer calls it."""
    if task == "quickstart":
        from engine.tasks.quickstart import QuickstartParams, team_fit

        letters = QuickstartParams(**params)
        return lambda c1, c2: [team_fit(a, b, letters.first_letters, letters.second_letters)
                               for a, b in zip(c1, c2, strict=True)]
    if task == "tldr":
        from engine.tasks.comlrl_writing import TLDR, level_terms

        return lambda c1, c2: [sum(level_terms(a, b, TLDR).values()) for a, b in zip(c1, c2, strict=True)]
    raise ValueError(f"--task {task!r}: choose one of {', '.join(TASKS)}")
