"""The learning guard: every trainer family trains for a second or two on its seeded tiny workload
(bench/training/guard_workloads.py) and its learning, measured outside the trainer, is checked against
the numbers recorded in tests/engine/learning_guard.json (bench/training/guard_record.py):

* everywhere, the gain must reach 0.6 x the recorded gain (a halved result fails);
* on the recorded platform (torch and transformers versions, CPU and its vector instructions, one
  torch thread) the tokens sampled after training and the numbers must equal the recorded ones
  exactly, so a change in any sampled token fails. Elsewhere the test says it checked the floor only
  (a LearningGuardPlatformWarning in the summary), never skips.

Regenerate with ``python -m bench.training.learning_guard --record``; a change of a recorded number
needs a reason in the commit message (docs/benchmarks.md, "The learning guard").
"""

from __future__ import annotations

import warnings

import pytest

from bench.training import guard_record
from bench.training.guard_workloads import FAMILIES, run_cooplab


class LearningGuardPlatformWarning(UserWarning):
    """The guard ran on another platform than the recorded one: only the floor was checked."""


RECORD = guard_record.load()


def test_the_record_covers_todays_workloads() -> None:
    assert guard_record.stale(RECORD) is None, guard_record.stale(RECORD)
    learning = [f for f, r in RECORD["families"].items() if r["gain"] >= guard_record.CLEAR_GAIN]
    # every family but MARLHF's two learns clearly on its workload (docs/benchmarks.md, "The learning guard")
    assert sorted(set(RECORD["families"]) - set(learning)) == ["marlhf", "marlhf_iter"], RECORD["families"]
    # z-scored advantages cancel MAReMax's baseline: it updates, and samples, exactly as MAGRPO
    fields = guard_record.EXACT_FIELDS
    assert [RECORD["families"]["maremax"][k] for k in fields] == [RECORD["families"]["magrpo"][k] for k in fields]


@pytest.mark.slow  # trains: out of the unit tier, run by make test
@pytest.mark.serial  # 20 s of steady CPU: run where it does not starve the parallel phase's live-server tests
@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_learns_as_recorded(family: str) -> None:
    recorded = RECORD["families"][family]
    measured = run_cooplab(family, RECORD["seed"]).record()
    mismatch = guard_record.platform_mismatch_of(RECORD)
    if mismatch:
        warnings.warn(LearningGuardPlatformWarning(
            f"learning guard, {family}: another platform than the recorded one ({'; '.join(mismatch)}): checked the "
            f"gain floor only (gain {measured['gain']:+.4f}, recorded {recorded['gain']:+.4f})"), stacklevel=1)
    problems = guard_record.check(recorded, measured, exact=not mismatch)
    assert not problems, f"{family}: " + "; ".join(problems)
