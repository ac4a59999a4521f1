"""The code reward on all 164 HumanEval problems, in a process of its own: ``python -m
tests.engine.tasks.humaneval_scores`` prints one JSON object with the ``tests`` credit of every problem's
canonical solution and of one universal object (:data:`UNIVERSAL`), and the universal object's totals.

Its own process because every sandboxed program starts with a fork of the process that scores (the
sandbox drops to its own uid, so ``subprocess`` cannot use ``vfork``): a pytest process has torch and
transformers loaded, and each of the 656 forks (two sandboxes per program) copied and tore down its page
tables. This process builds the task with the built-in builder (the one ``build_task`` calls, its
parameters validated by the task's catalog entry) and never imports torch: 49 ms of CPU time per scored
program against 79 ms in a test process (20 programs each way, measured on a loaded 2-core machine).
"""

from __future__ import annotations

import json
import sys

from engine.schema.task_registry import get_task_info, validate_params
from engine.tasks.humaneval.problems import load_problems
from engine.tasks.humaneval.task import build_humaneval

UNIVERSAL = (
    "class Anything:\n"
    "    def __eq__(self, other): return True\n"
    "    def __ne__(self, other): return False\n"
    "    def __lt__(self, other): return True\n"
    "    def __gt__(self, other): return True\n"
    "    def __le__(self, other): return True\n"
    "    def __ge__(self, other): return True\n"
    "    def __hash__(self): return 0\n"
    "    def __bool__(self): return True\n"
    "    def __len__(self): return 0\n"
    "    def __iter__(self): return iter(())\n"
    "    def __abs__(self): return 0\n"
    "    def __sub__(self, other): return self\n"
    "    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __sub__\n"
    "    def __getattr__(self, name): return self\n"
    "    def __call__(self, *a, **k): return self\n"
    "def {name}(*args, **kwargs):\n"
    "    return Anything()\n"
)

PARAMS = {"train_slice": "0:163", "eval_slice": "163:164", "workers": 2, "sandbox_timeout_s": 20}


def scores() -> dict[str, object]:
    """Every problem's task id, the ``tests`` credit of its canonical solution and of :data:`UNIVERSAL`,
    and the universal object's total rewards."""
    task = build_humaneval(validate_params(get_task_info("humaneval"), PARAMS), 1)
    items = list(task.train_dataset) + list(task.eval_dataset)  # all 164 (the splits are disjoint)
    canonical = {p["task_id"]: p["canonical_solution"] for p in load_problems()}
    _, canonical_terms = task.reward_func.score([[canonical[item["task_id"]] for item in items]], items, None)
    universal_totals, universal_terms = task.reward_func.score(
        [[UNIVERSAL.format(name=item["entry_point"]) for item in items]], items, None)
    return {"task_ids": [item["task_id"] for item in items],
            "canonical_tests": list(canonical_terms["tests"]),
            "universal_tests": list(universal_terms["tests"]),
            "universal_totals": list(universal_totals)}


if __name__ == "__main__":
    json.dump(scores(), sys.stdout)
