"""The tiered code reward: structure, syntax, tests passed, cooperation.

Levels build on each other, so a model first learns to write the right functions, then valid
Python, then passing code, then code that really uses its partner's helper:

* ``structure`` (up to 1.0): the helper is defined and returns a value (+0.4, two-agent only), the
  main function is defined and returns a value (+0.6; single-agent: +1.0). Without a main function
  nothing else is scored.
* ``syntax`` (0 or 0.5): the joint program parses. Without it nothing else is scored.
* ``tests`` (0..1): fraction of the problem's checks that pass (run in the sandbox).
* ``cooperation`` (two agents, only once a test passes): +0.5 when main calls the helper, +0.5 more
  when main does real work besides calling it, -0.5 when it calls the helper and ignores the result.
"""

from __future__ import annotations

from engine.tasks.humaneval.code import CodeFacts

TERMS_TEAM = ("structure", "syntax", "tests", "cooperation")
TERMS_SINGLE = ("structure", "syntax", "tests")
MAX_TEAM_REWARD = 1.0 + 0.5 + 1.0 + 1.0


def tiered_terms(facts: CodeFacts, test_fraction: float, *, team: bool) -> dict[str, float]:
    """Each level's value for one joint answer (pure function of the code facts and test result)."""
    terms = {name: 0.0 for name in (TERMS_TEAM if team else TERMS_SINGLE)}
    if team:
        terms["structure"] = 0.4 * (facts.helper_defined and facts.helper_returns) + 0.6 * (
            facts.main_defined and facts.main_returns
        )
    else:
        terms["structure"] = 1.0 * (facts.main_defined and facts.main_returns)
    if not (facts.main_defined and facts.main_returns):
        return terms
    if not facts.syntax_ok:
        return terms
    terms["syntax"] = 0.5
    terms["tests"] = float(test_fraction)
    if team and test_fraction > 0:
        bonus = 0.0
        if facts.calls_helper:
            bonus += 0.5
            if not facts.trivial_wrapper:
                bonus += 0.5
        if facts.helper_result_ignored:
            bonus -= 0.5
        terms["cooperation"] = bonus
    return terms
