"""Reading the judge's verdict: counts from the caller's plan, clamped; bad verdicts fail with a reason."""

from __future__ import annotations

import json

from engine.sandbox.judged import clean_text, parse_verdict


def _line(**fields) -> str:
    tally = {"defined": True, "passed": 0, "steps_done": 0, "first_failure": "", "error": ""}
    tally.update(fields)
    return json.dumps(tally)


def test_the_last_complete_line_counts():
    text = "\n".join([_line(passed=1), _line(passed=2), '{"defined": true, "passed": 3, "fir'])
    verdict = parse_verdict(text, 7, timed_out=True, timeout_s=5)
    assert (verdict.passed, verdict.total, verdict.defined, verdict.status) == (2, 7, True, "timeout")
    assert "wall-clock limit of 5s" in verdict.error
    assert verdict.fraction == 2 / 7


def test_counts_are_clamped_to_the_callers_plan():
    assert parse_verdict(_line(passed=999), 7, timed_out=False, timeout_s=5).passed == 7
    assert parse_verdict(_line(passed=-4), 7, timed_out=False, timeout_s=5).passed == 0
    # the total is the caller's own: a verdict cannot enlarge or shrink it
    assert parse_verdict(_line(passed=3, total=3), 7, timed_out=False, timeout_s=5).total == 7


def test_forged_and_malformed_verdicts_are_failures_not_exceptions():
    for text in ['{"passed": 1e300, "defined": true}', '{"passed": "7"}', "[7]", "garbage", "", "\x00" * 10,
                 '{"passed": true}']:
        verdict = parse_verdict(text, 7, timed_out=False, timeout_s=5)
        assert verdict.passed == 0 and not verdict.defined and verdict.status == "failed", text
        assert verdict.error == "the judge reported no verdict"
    assert parse_verdict("", 7, timed_out=True, timeout_s=2).error.startswith("the tests were cut off")


def test_reasons_are_short_and_free_of_control_characters():
    nasty = "boom\x1b[31m\r\nred\x00\u202e" + "x" * 1000
    verdict = parse_verdict(_line(passed=1, error=nasty, first_failure=nasty), 7, timed_out=False, timeout_s=5)
    for text in (verdict.error, verdict.first_failure):
        assert len(text) <= 300 and text.startswith("boom [31m red")
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in text)
    assert clean_text("a\tb\n\nc", 10) == "a b c"
    assert clean_text("y" * 20, 10) == "yyyyyyy..."
