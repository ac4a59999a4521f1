"""Small data files in the form of CoMLRL's benchmarks, written by the tests (never downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

ADD = {
    "task_id": "Fixture/0",
    "prompt": 'def add_all(numbers):\n    """Sum of the numbers."""\n',
    "entry_point": "add_all",
    "test": "def check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n"
            "    assert candidate([5]) == 5\n    assert candidate([-1, 1]) == 0\n",
}


def code_problems(count: int = 6) -> list[dict]:
    """``count`` distinct problems in HumanEval's form: problem i sums a list and adds i."""
    problems = []
    for i in range(count):
        problems.append({
            "task_id": f"Fixture/{i}",
            "prompt": f'def add_all_{i}(numbers):\n    """Sum of the numbers plus {i}."""\n',
            "entry_point": f"add_all_{i}",
            "test": f"def check(candidate):\n    assert candidate([1, 2]) == {3 + i}\n    assert candidate([]) == {i}\n",
        })
    return problems


TEXTS = [
    "The city council voted to extend the library's opening hours after a petition signed by students.",
    "A small bakery started donating its unsold bread to a shelter, and neighbours began to help deliver it.",
    "My roommate keeps borrowing my bike without asking, and last week he left it unlocked outside a shop.",
    "Researchers measured how quickly seedlings grow under coloured light and found blue light slowed them.",
    "After two years of practice the choir performed its first concert in the old railway station hall.",
    "The ferry between the islands was cancelled for a week because of storms, stranding several tourists.",
]


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def writing_files(folder: Path, column: str = "prompt") -> tuple[str, str]:
    """(train file, held-out file) of short texts under ``column``: four to train on, two held out."""
    train = write_jsonl(folder / "writing_train.jsonl", [{column: text} for text in TEXTS[:4]])
    held_out = write_jsonl(folder / "writing_eval.jsonl", [{column: text} for text in TEXTS[4:]])
    return train, held_out


def code_file(folder: Path, count: int = 6) -> str:
    return write_jsonl(folder / "code_problems.jsonl", code_problems(count))
