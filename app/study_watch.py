"""What the study page's watch section decides from a study and its children (pure functions).

The children table refreshes on its own (a fragment); the rest of the page (the picker's state, the
results, the buttons) is drawn by the whole page. When a child or the study changes state, the page
is drawn again, so results appear as children finish without a reload. Stop all and Resume all are
offered only when they would do something.
"""

from __future__ import annotations

from collections.abc import Sequence

from db import states
from db.study_records import ACTIVE, PENDING, Study, StudyTrial

RESUMABLE = (states.STOPPED, states.CANCELLED, states.LOST)
"""The children resume-all gives a new run (unless the study stopped them early)."""


def watch_state(study: Study, trials: Sequence[StudyTrial]) -> tuple[str, tuple[str, ...]]:
    """The states the whole page depends on: the study's and each child's (not their steps)."""
    return study.status, tuple(t.status for t in trials)


def can_stop(study: Study, trials: Sequence[StudyTrial]) -> bool:
    """Stop all has something to do: the study still queues children, or a child is in flight."""
    return study.status == ACTIVE or any(t.status in states.ACTIVE_STATUSES for t in trials)


def can_resume(study: Study, trials: Sequence[StudyTrial]) -> bool:
    """Resume all has something to do: a child ended stopped, cancelled or lost, not stopped early by
    the study, or a child waits for a slot that a stopped study never gives it (``pending``), while the
    study is not queueing children already."""
    return study.status != ACTIVE and any((t.status in RESUMABLE and not t.stop_reason) or t.status == PENDING
                                          for t in trials)
