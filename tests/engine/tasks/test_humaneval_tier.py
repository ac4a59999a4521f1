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


# entry points the tests can never call and get a value from (issue 38, item 14): each earned structure and
# syntax before, as long as a `return <value>` appeared somewhere inside it
UNTESTABLE = {
    "under if False": ("if False:\n    def f(x):\n        return x + 1\n", "only inside"),
    "under the main guard": ("if __name__ == '__main__':\n    def f(x):\n        return x + 1\n", "only inside"),
    "a method": ("class C:\n    def f(x):\n        return x + 1\n", "only inside"),
    "inside another function": ("def g():\n    def f(x):\n        return x + 1\n    return f\n", "only inside"),
    "returns only from a nested function": (
        "def f(x):\n    def inner():\n        return x + 1\n    inner()\n", "only from a nested function or class"),
    "returns only from a nested class": (
        "def f(x):\n    class K:\n        def m(self):\n            return x\n    K()\n",
        "only from a nested function or class"),
    "a generator": ("def f(x):\n    yield x\n    return x\n", "a generator"),
    "async": ("async def f(x):\n    return x + 1\n", "a coroutine"),
    "rebound to None": ("def f(x):\n    return x + 1\nf = None\n", "bound again"),
    "deleted": ("def f(x):\n    return x + 1\ndel f\n", "bound again"),
    "a class of its name under a block": ("def f(x):\n    return x + 1\nif True:\n    class f:\n        pass\n",
                                          "bound again"),
    "imported over": ("def f(x):\n    return x + 1\nfrom os import getcwd as f\n", "bound again"),
}


@pytest.mark.parametrize(("main", "fragment"), UNTESTABLE.values(), ids=UNTESTABLE)
def test_an_entry_point_the_tests_cannot_call_earns_no_structure(main, fragment):
    terms, facts = _terms(HELPER, main, fraction=1.0)
    assert facts.syntax_ok and fragment in facts.main_problem, facts
    assert terms == {"structure": 0.4, "syntax": 0.0, "tests": 0.0, "cooperation": 0.0}, terms
    single, _ = _terms("", main, team=False, fraction=1.0)
    assert single == dict.fromkeys(TERMS_SINGLE, 0.0), single
    # the same rule for the helper: only its own share is lost
    helper = main.replace("f(", "aux(").replace("del f", "del aux").replace("f = None", "aux = None")
    helper = helper.replace("class f", "class aux").replace(" as f", " as aux")
    terms, facts = _terms(helper, "def f(x):\n    return x + 1\n", fraction=0.0)
    assert fragment in facts.helper_problem and terms["structure"] == MAIN_SHARE, (helper, facts)


def test_the_feedback_says_why_an_entry_point_cannot_be_tested():
    from engine.sandbox import SandboxPool
    from engine.tasks.humaneval.execution import default_limits

    item = {"prompt": STUB, "entry_point": "f", "test": "def check(candidate):\n    assert candidate(1) == 2\n"}
    with SandboxPool(1, limits=default_limits(4.0)) as pool:
        scorer = CodeScorer(pool, team=True)
        text = scorer.feedback(item, [HELPER, UNTESTABLE["under if False"][0]], 1)
        assert "The main function `f` is defined only inside" in text and "top level" in text, text
        text = scorer.feedback(item, [HELPER, UNTESTABLE["returns only from a nested function"][0]], 1)
        assert "returns a value only from a nested function or class" in text, text
        text = scorer.feedback(item, ["class C:\n    def aux(x):\n        return x\n", "    return x + 1\n"], 0)
        assert "Your helper function `aux` is defined only inside" in text, text
        assert scorer.evaluate(item, [HELPER, UNTESTABLE["a method"][0]]).outcome is None  # never sent to the sandbox


TESTABLE = [
    "def f(x):\n    return x + 1\n", "    return x + 1\n", "def f(x):\n    if x:\n        return 1\n    return 2\n",
    "import functools\n@functools.lru_cache\ndef f(x):\n    return x\n", "if True:\n    pass\ndef f(x):\n    return x\n",
    "def f(x):\n    g = lambda: 1\n    def h():\n        return 2\n    return g() + h()\n",
    "def f(x):\n    try:\n        return int(x)\n    except ValueError as f:\n        return 0\n",
    "def f(x):\n    return x\nprint(f(1))\nvalues = [f for f in range(2)]\n",
    "f = None\ndef f(x):\n    return x\n",
]


@pytest.mark.parametrize("main", TESTABLE)
def test_a_top_level_entry_point_that_returns_keeps_its_credit(main):
    terms, facts = _terms(HELPER, main, fraction=1.0)
    assert facts.main_problem == "" and terms["structure"] == 1.0 and terms["syntax"] == 0.5, (facts, terms)
