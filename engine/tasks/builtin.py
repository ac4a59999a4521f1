"""The builders of the built-in tasks, by name: the code half of the built-in task table.

Each builder takes the task's validated parameters and the team size and returns a :class:`Task`
(datasets, formatters, reward, transition). What each task is called, who plays it and which
parameters it takes is torch-free data in :mod:`engine.schema.task_table`; the two tables name the
same tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.tasks.base import Task
from engine.tasks.comlrl_writing import build_arxiv, build_tldr
from engine.tasks.humaneval.comlrl_code import build_coop_humaneval, build_mbpp
from engine.tasks.humaneval.task import build_humaneval
from engine.tasks.quickstart import build_quickstart
from engine.tasks.self_play import build_role_switch, build_self_refine
from engine.tasks.writing import build_writing

BUILDERS: dict[str, Callable[[Any, int], Task]] = {
    "quickstart": build_quickstart,
    "humaneval": build_humaneval,
    "writing": build_writing,
    "coop_humaneval": build_coop_humaneval,
    "mbpp": build_mbpp,
    "tldr": build_tldr,
    "arxiv": build_arxiv,
    "self_refine": build_self_refine,
    "role_switch": build_role_switch,
}
