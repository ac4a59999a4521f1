"""The tiered code reward: structure, syntax, tests passed, cooperation.

The tier is a ladder: each rung pays only once the rung below it has paid, so a model first learns
to write Python that parses and defines the right functions, then a testable program, then passing
code, then code that really uses its partner's helper. Bottom to top (:data:`LADDER`):

* the floor: the joint program (problem prompt + helper + main) parses. Without it every term is 0:
  text that merely looks like code (``return return return``) earns nothing.
* ``structure`` (up to 1.0): in the parsed program, the helper is defined and returns a value
  (+0.4, two-agent only), the main function is defined and returns a value (+0.6, :data:`MAIN_SHARE`;
  single-agent: +1.0). Defined means as the tests would call it
  (:func:`engine.tasks.humaneval.code.top_level_def`): a plain ``def`` at the top level of the
  program (not under ``if False:``, not a method, not nested), bound to nothing else after it, neither
  async nor a generator, whose own body returns a value (a ``return`` inside a nested function does not
  count). Anything else earns no share, and the feedback says why.
* ``syntax`` (0 or 0.5): the parsing program has main's structure, so it can be tested. Without it
  nothing above counts.
* ``tests`` (0..1): fraction of the problem's checks that pass (run in the sandbox).
* ``cooperation`` (two agents, only once a test passes): +0.5 when main calls the helper, +0.5 more
  when main does real work besides calling it, -0.5 when it calls the helper and ignores the result.
"""

from __future__ import annotations

from engine.tasks.humaneval.code import CodeFacts, PartFacts

LADDER = ("structure", "syntax", "tests", "cooperation")  # bottom to top, above the parse floor
TERMS_TEAM = LADDER
TERMS_SINGLE = ("structure", "syntax", "tests")
HELPER_SHARE = 0.4
MAIN_SHARE = 0.6
SYNTAX_REWARD = 0.5
MAX_TEAM_REWARD = HELPER_SHARE + MAIN_SHARE + SYNTAX_REWARD + 1.0 + 1.0


def tiered_terms(facts: CodeFacts, test_fraction: float, *, team: bool) -> dict[str, float]:
    """Each rung's value for one joint answer (pure function of the code facts and test result).

    Every rung is gated on the one below: nothing without a parse, ``syntax`` only with main's
    share of ``structure``, ``tests`` only with ``syntax``, ``cooperation`` only with a passing test.
    """
    terms = {name: 0.0 for name in (TERMS_TEAM if team else TERMS_SINGLE)}
    if not facts.syntax_ok:
        return terms  # the floor: code that does not parse is paid nothing
    main_ok = facts.main_defined and facts.main_returns
    helper_ok = facts.helper_defined and facts.helper_returns
    if team:
        terms["structure"] = HELPER_SHARE * helper_ok + MAIN_SHARE * main_ok
    else:
        terms["structure"] = 1.0 * main_ok
    if not main_ok:
        return terms
    terms["syntax"] = SYNTAX_REWARD
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


LEVEL_CALLS_HELPER = 0.5
LEVEL_NOT_WRAPPER = 1.0
LEVEL_IGNORED_RESULT = -0.5
MAX_LEVEL_REWARD = HELPER_SHARE + MAIN_SHARE + SYNTAX_REWARD + 1.0 + LEVEL_CALLS_HELPER + LEVEL_NOT_WRAPPER  # 4.0


def level_terms(parts: PartFacts, facts: CodeFacts, test_fraction: float, *, team: bool) -> dict[str, float]:
    """CoMLRL's level reward for one joint answer (LLM_Collab_Code_Generation, max 4.0), level by level.

    ``structure``: each part read on its own: the helper part defines ``aux`` returning a value
    (+0.4), the main part defines the entry point returning a value (+0.6; one agent: +1.0). Without
    main's share nothing above counts. ``syntax``: the joint program parses (+0.5); without it the
    tests cannot run. ``tests``: the fraction of checks passed. ``cooperation`` (two agents, once a
    test passes and the helper is defined): +0.5 main calls the helper, then +1.0 when main is not a
    wrapper of it (``return aux(...)``, or ``x = aux(...)`` then ``return x``) and -0.5 when a call's
    value is ignored."""
    terms = {name: 0.0 for name in (TERMS_TEAM if team else TERMS_SINGLE)}
    if team:
        terms["structure"] = HELPER_SHARE * parts.helper_ok + MAIN_SHARE * parts.main_ok
    else:
        terms["structure"] = 1.0 * parts.main_ok
    if not parts.main_ok or not facts.syntax_ok:
        return terms
    terms["syntax"] = SYNTAX_REWARD
    terms["tests"] = float(test_fraction)
    if team and test_fraction > 0 and parts.helper_ok and facts.calls_helper:
        bonus = LEVEL_CALLS_HELPER
        if not facts.wrapper:
            bonus += LEVEL_NOT_WRAPPER
        if facts.helper_result_ignored:
            bonus += LEVEL_IGNORED_RESULT
        terms["cooperation"] = bonus
    return terms
