"""Scoring joint code answers: assemble, analyse, run the tests in the sandbox, cache the outcome.

One :class:`CodeScorer` serves the reward, the multi-turn feedback and the pass@k check of a task,
so a joint answer's tests run once even when all three look at it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from engine.sandbox import FunctionTests, SandboxPool
from engine.tasks.humaneval.code import CodeFacts, analyze, assemble_program, extract_code, part_facts
from engine.tasks.humaneval.execution import TestOutcome, function_tests, run_tests
from engine.tasks.humaneval.problems import split_tests
from engine.tasks.humaneval.reward import TERMS_SINGLE, TERMS_TEAM, level_terms, tiered_terms


@dataclass(frozen=True)
class Evaluation:
    """A joint answer's program, static facts and test outcome."""

    program: str
    facts: CodeFacts
    outcome: TestOutcome | None  # None when the structure or syntax level already failed

    @property
    def test_fraction(self) -> float:
        return self.outcome.fraction if self.outcome is not None else 0.0

    @property
    def solved(self) -> bool:
        return self.outcome is not None and self.outcome.total > 0 and self.outcome.passed == self.outcome.total


@lru_cache(maxsize=512)
def _suite(test_source: str, entry_point: str, prompt: str) -> FunctionTests:
    return function_tests(split_tests(test_source), entry_point, prompt)


class CodeScorer:
    """Scores joint answers to HumanEval-style items (``prompt``, ``entry_point``, ``test``)."""

    def __init__(
        self,
        pool: SandboxPool,
        *,
        team: bool,
        helper_name: str = "aux",
        step_timeout_s: float = 3.0,
        cache_size: int = 4096,
        reward: str = "tiered",
    ) -> None:
        if reward not in ("tiered", "level"):
            raise ValueError(f"reward must be 'tiered' or 'level', not {reward!r}")
        self.reward = reward
        self.pool = pool
        self.team = team
        self.helper_name = helper_name
        self.step_timeout_s = step_timeout_s
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, Evaluation] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def term_names(self) -> tuple[str, ...]:
        return TERMS_TEAM if self.team else TERMS_SINGLE

    def parts(self, item: dict, completions: Sequence[str]) -> tuple[str, str, str]:
        """(helper code, main code, joint program) of one joint answer."""
        if self.team:
            helper, main = extract_code(completions[0]), extract_code(completions[1])
        else:
            helper, main = "", extract_code(completions[0])
        return helper, main, assemble_program(item["prompt"], helper, main, item["entry_point"])

    def evaluate_many(self, items: Sequence[dict], joint_answers: Sequence[Sequence[str]]) -> list[Evaluation]:
        """Evaluate every joint answer; programs not seen before run in the sandbox in parallel."""
        keys = [(item["prompt"], tuple(answer)) for item, answer in zip(items, joint_answers, strict=True)]
        results: dict[int, Evaluation] = {}
        pending: list[tuple[int, dict, str, CodeFacts]] = []
        with self._lock:
            cached = {i: self._cache[k] for i, k in enumerate(keys) if k in self._cache}
        results.update(cached)
        for i, (item, answer) in enumerate(zip(items, joint_answers, strict=True)):
            if i in results:
                continue
            helper, main, program = self.parts(item, answer)
            facts = analyze(helper, main, program, item["entry_point"], self.helper_name)
            if facts.main_defined and facts.main_returns and facts.syntax_ok:
                pending.append((i, item, program, facts))
            else:
                results[i] = Evaluation(program, facts, None)
        if pending:
            # run each distinct program once even when several joint answers assemble to it
            unique: dict[tuple[str, str, str, str], int] = {}
            for _, item, program, _ in pending:
                unique.setdefault((item["test"], item["entry_point"], item["prompt"], program), len(unique))
            order = list(unique)
            outcomes = run_tests(
                [key[3] for key in order],
                [_suite(*key[:3]) for key in order],
                pool=self.pool,
                step_timeout_s=self.step_timeout_s,
            )
            for i, item, program, facts in pending:
                program_key = (item["test"], item["entry_point"], item["prompt"], program)
                results[i] = Evaluation(program, facts, outcomes[unique[program_key]])
        with self._lock:
            for i, key in enumerate(keys):
                self._cache[key] = results[i]
                self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return [results[i] for i in range(len(keys))]

    def evaluate(self, item: dict, completions: Sequence[str]) -> Evaluation:
        return self.evaluate_many([item], [list(completions)])[0]

    def terms(self, agent_completions, batch_items, prompts) -> dict[str, list[float]]:
        """Reward-group function: every tier's values, one per joint action."""
        n = len(agent_completions[0])
        answers = [[agent[j] for agent in agent_completions] for j in range(n)]
        evaluations = self.evaluate_many(list(batch_items), answers)
        if self.reward == "level":
            rows = [level_terms(self.part_facts(item, answer), e.facts, e.test_fraction, team=self.team)
                    for item, answer, e in zip(batch_items, answers, evaluations, strict=True)]
        else:
            rows = [tiered_terms(e.facts, e.test_fraction, team=self.team) for e in evaluations]
        return {name: [row[name] for row in rows] for name in self.term_names}

    def part_facts(self, item: dict, completions: Sequence[str]):
        """Each part read on its own (CoMLRL's level 1)."""
        helper, main, _ = self.parts(item, completions)
        return part_facts(helper, main, item["prompt"], item["entry_point"], self.helper_name)

    def level_passed_feedback(self, item: dict, completions: Sequence[str], agent_index: int) -> str:
        """CoMLRL's ``level_passed`` mode: a yes or no per level, no details."""
        evaluation = self.evaluate(item, completions)
        parts = self.part_facts(item, completions)

        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        lines = []
        if self.team:
            lines.append(f"Helper `{self.helper_name}` defined and returns a value: {yes(parts.helper_ok)}")
        lines += [f"Main `{item['entry_point']}` defined and returns a value: {yes(parts.main_ok)}",
                  f"The program parses: {yes(evaluation.facts.syntax_ok)}",
                  f"All tests pass: {yes(evaluation.solved)}"]
        return "\n".join(lines)

    def passed_feedback(self, item: dict, completions: Sequence[str], agent_index: int) -> str:
        """CoMLRL's ``passed`` mode: one bit, whether every test passes."""
        return "All tests passed." if self.evaluate(item, completions).solved else "Not all tests passed."

    def feedback(self, item: dict, completions: Sequence[str], agent_index: int) -> str:
        """What the environment tells an agent after a turn: structure, syntax or test results."""
        evaluation = self.evaluate(item, completions)
        facts, entry = evaluation.facts, item["entry_point"]
        if not facts.syntax_ok:  # nothing else is known about code that does not parse
            return f"The team's program does not parse: {facts.syntax_error}."
        notes = []
        if self.team and agent_index == 0 and not (facts.helper_defined and facts.helper_returns):
            why = facts.helper_problem or "is missing or returns nothing"
            notes.append(f"Your helper function `{self.helper_name}` {why}.")
        if not (facts.main_defined and facts.main_returns):
            notes.append(f"The main function `{entry}` {facts.main_problem or 'is missing or returns nothing'}.")
        elif evaluation.outcome is not None:
            out = evaluation.outcome
            notes.append(f"Tests: {out.passed}/{out.total} passed.")
            if out.error:
                notes.append(f"Error: {out.error}")
            if out.first_failure:
                notes.append(f"First failing check: {out.first_failure}")
            if self.team and not facts.calls_helper:
                notes.append(f"`{entry}` does not call the helper `{self.helper_name}`.")
        return "\n".join(notes) or "No problems found."
