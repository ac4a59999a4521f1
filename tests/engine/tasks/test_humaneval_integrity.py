"""The code reward on all 164 problems: every canonical solution earns full test credit, and one
universal object (equal to everything, any attribute, any call) earns none."""

from __future__ import annotations

import pytest

from engine.tasks import build_task
from engine.tasks.humaneval.problems import load_problems

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


@pytest.fixture(scope="module")
def coder():
    task = build_task("humaneval", {"train_slice": "0:163", "eval_slice": "163:164", "workers": 2,
                                    "sandbox_timeout_s": 20}, 1)
    return task, list(task.train_dataset) + list(task.eval_dataset)  # all 164 (the splits are disjoint)


@pytest.mark.slow
def test_every_canonical_solution_gets_full_credit(coder):
    task, items = coder
    canonical = {p["task_id"]: p["canonical_solution"] for p in load_problems()}
    _, terms = task.reward_func.score([[canonical[item["task_id"]] for item in items]], items, None)
    failed = [item["task_id"] for item, value in zip(items, terms["tests"], strict=True) if value != 1.0]
    assert len(items) == 164 and failed == []


@pytest.mark.slow
def test_a_universal_object_gets_no_credit_anywhere(coder):
    task, items = coder
    answers = [UNIVERSAL.format(name=item["entry_point"]) for item in items]
    totals, terms = task.reward_func.score([answers], items, None)
    assert sum(terms["tests"]) == 0.0
    assert set(totals) == {1.5}  # structure and syntax only
