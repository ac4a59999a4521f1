"""The humaneval tier pays only for code that parses, and every rung waits for the one below it.

The ladder, bottom to top: the joint program parses -> ``structure`` -> ``syntax`` -> ``tests``
-> ``cooperation``. The garbage test replays what a real run produced (replies that were mostly the
token ``return``); the property test throws thousands of generated completions at the tier.
"""

from __future__ import annotations

import random

import pytest

from engine.tasks.humaneval.code import analyze, assemble_program, syntax_error_text
from engine.tasks.humaneval.reward import LADDER, MAIN_SHARE, TERMS_SINGLE, TERMS_TEAM, tiered_terms
from engine.tasks.humaneval.scoring import CodeScorer

STUB = 'def f(x):\n    """Add one."""\n'
HELPER = "def aux(x):\n    return x + 1\n"
GARBAGE = [
    "return " * 60,
    "return return return\nreturn x\n" * 8,
    "def f(x):\n    return return return x\n",
    "def f(x):\n    return (\n",
    "```python\ndef f(x):\n    return x +\n```",
    "def aux(x): return\nreturn 1 return 2\n",
    "f(x) return x + 1 return",
    "def f(x):\nreturn x\n",  # the body is not indented
    "return x\x00\n",  # a null byte: the parser knows no line
    "(" * 300 + "\n",  # deeper than the parser allows
    "-" * 200_000 + "1\n",  # the parser runs out of memory/recursion
]


def _terms(helper: str, main: str, *, team: bool = True, fraction: float = 1.0) -> tuple[dict, object]:
    program = assemble_program(STUB, helper, main, "f")
    facts = analyze(helper, main, program, "f")
    return tiered_terms(facts, fraction, team=team), facts


@pytest.mark.parametrize("main", GARBAGE)
def test_garbage_that_does_not_parse_earns_no_structure(main):
    for helper in (HELPER, "", main):
        terms, facts = _terms(helper, main, fraction=1.0)
        assert not facts.syntax_ok
        assert terms == dict.fromkeys(TERMS_TEAM, 0.0), (helper, main, terms)
    single, _ = _terms("", main, team=False)
    assert single == dict.fromkeys(TERMS_SINGLE, 0.0)


def test_the_parser_position_is_named_only_when_known():
    _, facts = _terms(HELPER, "def f(x):\n    return return\n")
    assert facts.syntax_error.startswith("SyntaxError: invalid syntax (line ")
    assert "None" not in facts.syntax_error and ", column " in facts.syntax_error
    _, facts = _terms(HELPER, "return x\x00\n")
    # Python 3.11.4+ raises SyntaxError for a NUL byte, earlier 3.11 releases ValueError: no position either way
    assert facts.syntax_error in ("SyntaxError: source code string cannot contain null bytes",
                                  "the program cannot be parsed (source code string cannot contain null bytes)")
    _, facts = _terms(HELPER, "-" * 200_000 + "1\n")
    assert facts.syntax_error == "the program is nested too deeply to parse"
    assert syntax_error_text(SyntaxError("bad", ("x.py", 3, None, "x", None, None))) == "SyntaxError: bad (line 3)"


def test_the_feedback_names_the_line_and_never_none():
    from engine.sandbox import SandboxPool
    from engine.tasks.humaneval.execution import default_limits

    item = {"prompt": STUB, "entry_point": "f", "test": "def check(candidate):\n    assert candidate(1) == 2\n"}
    with SandboxPool(1, limits=default_limits(4.0)) as pool:
        scorer = CodeScorer(pool, team=True)
        for main in GARBAGE:
            text = scorer.feedback(item, [HELPER, main], 1)
            assert "does not parse" in text and "None" not in text, text
            assert scorer.evaluate(item, [HELPER, main]).outcome is None  # never sent to the sandbox
        text = scorer.feedback(item, [HELPER, "def f(x):\n    return return\n"], 1)
    assert "(line 8, column " in text  # stub 1-2, blank, helper 4-5, blank, main 7-8


VALID = [
    "def f(x):\n    y = aux(x)\n    return y + 1\n", "def f(x):\n    return aux(x)\n", "    return x + 1\n",
    "def f(x):\n    aux(x)\n    return 1\n", "def f(x):\n    pass\n", "def f(x):\n    return\n",
    "```python\ndef f(x):\n    return x\n```", HELPER, "def aux(x):\n    return\n", "", "x = 1\n",
]
TOKENS = ["return", "return", "def", "f", "aux", "(x)", "(", ")", ":", "x", "+", "1", "\n", "\n    ", "```",
          "pass", "'", '"', "\t", "\x00", "return x", " "]


def _random_completion(rng: random.Random) -> str:
    """A valid snippet, left as it is or mutated: garbage tokens inserted, a slice cut, or pure garbage."""
    text = rng.choice(VALID)
    mode = rng.random()
    if mode < 0.35:
        return text
    if mode < 0.85:
        for _ in range(rng.randint(1, 4)):
            cut = rng.randint(0, len(text))
            if rng.random() < 0.7:
                text = text[:cut] + rng.choice(TOKENS) + " " + text[cut:]
            else:
                text = text[:cut] + text[cut + rng.randint(1, 8):]
        return text
    return " ".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 24)))


def test_the_tier_is_monotone_over_many_completions():
    """Property: for every generated joint answer and any test result, no rung pays unless the one
    below it paid: nothing without a parse, syntax only with main's structure, tests only with
    syntax, cooperation only with a passing test."""
    rng = random.Random(20260924)
    seen = {"parsed": 0, "syntax": 0, "structure_only": 0}
    for _ in range(3000):
        helper, main = _random_completion(rng), _random_completion(rng)
        fraction = rng.choice([0.0, 0.25, 1.0])
        for team in (True, False):
            terms, facts = _terms(helper if team else "", main, team=team, fraction=fraction)
            assert list(terms) == [name for name in LADDER if name in terms]
            if not facts.syntax_ok:
                assert not any(terms.values()), (helper, main, terms)
                continue
            seen["parsed"] += 1
            main_share = MAIN_SHARE if team else 1.0
            if terms["syntax"]:
                seen["syntax"] += 1
                assert terms["structure"] >= main_share, (helper, main, terms)
            elif terms["structure"]:
                seen["structure_only"] += 1
            if terms["tests"]:
                assert terms["syntax"] > 0, (helper, main, terms)
            if team and terms["cooperation"]:
                assert terms["tests"] > 0, (helper, main, terms)
            for name, value in terms.items():
                assert value == 0.0 or facts.syntax_ok, name
    # the generator reached every rung, so the checks above were exercised
    assert seen["parsed"] > 100 and seen["syntax"] > 20 and seen["structure_only"] > 5, seen


def test_a_real_answer_still_climbs_the_whole_ladder():
    main = "def f(x):\n    y = aux(x)\n    return y * 1\n"
    terms, facts = _terms(HELPER, main, fraction=1.0)
    assert facts.syntax_ok
    assert terms == {"structure": 1.0, "syntax": 0.5, "tests": 1.0, "cooperation": 1.0}
    # a parsing program whose helper part is missing keeps main's share; a helper alone earns only its own
    assert _terms("", main, fraction=0.0)[0] == {"structure": MAIN_SHARE, "syntax": 0.5, "tests": 0.0,
                                                 "cooperation": 0.0}
    assert _terms(HELPER, "", fraction=1.0)[0] == {"structure": 0.4, "syntax": 0.0, "tests": 0.0, "cooperation": 0.0}
