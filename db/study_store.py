"""Studies in the database: :class:`StudyStore` works on a :class:`db.store.Store`'s engine, each
method one transaction returning frozen records of :mod:`db.study_records`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from db import ops_studies
from db.engine import read_session, write_session
from db.store import Store
from db.study_records import RunMetricSummary, Study, StudyTrial, TrialInput


class StudyStore:
    """Studies and their children, on the database of ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    def create_study(self, name: str, spec: Mapping[str, Any], trials: Sequence[TrialInput], *, queue: str = "cpu",
                     max_concurrent: int = 1, description: str = "") -> Study:
        """Store an ``active`` study with its children (all waiting), in an experiment of its own named
        ``study: <name>``. ``name`` must be unique (else :class:`db.errors.DuplicateNameError`)."""
        with write_session(self.engine) as s:
            return ops_studies.create_study(s, name=name, description=description, spec=spec, trials=trials,
                                            queue=queue, max_concurrent=max_concurrent)

    def get_study(self, study_id: int) -> Study:
        """The study with this id (else :class:`db.errors.NotFoundError`)."""
        with read_session(self.engine) as s:
            return ops_studies.get_study(s, study_id)

    def find_study(self, name: str) -> Study | None:
        """The study with exactly this name, or None."""
        with read_session(self.engine) as s:
            return ops_studies.find_study(s, name)

    def list_studies(self, statuses: Iterable[str] | None = None, limit: int = 200) -> list[Study]:
        """Studies, newest first, optionally in some states."""
        with read_session(self.engine) as s:
            return ops_studies.list_studies(s, statuses=statuses, limit=limit)

    def trials(self, study_id: int) -> list[StudyTrial]:
        """The study's children by point, then seed, each with its run's state (``pending`` without one)."""
        with read_session(self.engine) as s:
            return ops_studies.list_trials(s, study_id)

    def trial_of_run(self, run_id: int) -> StudyTrial | None:
        """The study child that ``run_id`` executes, or None for a run of no study."""
        with read_session(self.engine) as s:
            return ops_studies.trial_of_run(s, run_id)

    def set_status(self, study_id: int, status: str) -> Study:
        """Set the study's state: ``active``, ``stopped`` or ``finished``."""
        with write_session(self.engine) as s:
            return ops_studies.set_status(s, study_id, status)

    def set_max_concurrent(self, study_id: int, max_concurrent: int) -> Study:
        """Change how many of the study's runs may be in flight at once."""
        with write_session(self.engine) as s:
            return ops_studies.set_max_concurrent(s, study_id, max_concurrent)

    def claim_slots(self, study_id: int) -> list[int]:
        """Give waiting children a ``queued`` run each, up to the free slots of an active study; returns
        the new run ids. Safe when several processes call it at once: the cap is never exceeded."""
        with write_session(self.engine) as s:
            return ops_studies.claim_slots(s, study_id)

    def stop_early(self, trial_id: int, reason: str) -> StudyTrial:
        """Record why the study stops this child early (the first reason is kept)."""
        with write_session(self.engine) as s:
            return ops_studies.stop_early(s, trial_id, reason)

    def release_for_resume(self, study_id: int) -> int:
        """Resume-all in the database: the study becomes ``active``; children that ended stopped,
        cancelled or lost (not stopped early) wait for a slot again. Returns how many."""
        with write_session(self.engine) as s:
            return ops_studies.release_for_resume(s, study_id)

    def delete_study(self, study_id: int, *, force: bool = False) -> None:
        """Delete the study and its children rows (its runs stay in its experiment). Refuses while runs
        are in flight unless ``force``."""
        with write_session(self.engine) as s:
            ops_studies.delete_study(s, study_id, force=force)

    def metric_summaries(self, run_ids: Iterable[int], keys: Iterable[str] | None = None) -> list[RunMetricSummary]:
        """Per run and metric key: last step, final value, best value, number of points."""
        with read_session(self.engine) as s:
            return ops_studies.metric_summaries(s, run_ids, keys)

    def metric_points(self, run_ids: Iterable[int], key: str) -> dict[int, list[tuple[int, float]]]:
        """All stored ``(step, value)`` points of ``key`` for each run, by step."""
        with read_session(self.engine) as s:
            return ops_studies.metric_points(s, run_ids, key)
