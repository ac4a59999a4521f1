"""The size limits of a study, checked before anything is expanded (pure: no database, no broker).

A study's children are ``points x seeds`` run configs, each built and validated before the study is
stored, so an unbounded study (ten fields of ten values are 10^10 points; ``seeds: 1e9`` a billion
copies of each) would hold a process for hours or exhaust its memory. :func:`size_problems` counts
the points (the product of the grid's list lengths, or random search's ``samples``) and the seeds (a
count, or the list's length) arithmetically, before one point is built, and names each limit the
study exceeds with the count, the limit and the operator setting that raises it;
:func:`expansion_problem` is the deadline the expansion itself checks after each point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LIMIT_SETTINGS = {"max_points": "COOPLAB_MAX_STUDY_POINTS", "max_seeds": "COOPLAB_MAX_STUDY_SEEDS",
                  "max_runs": "COOPLAB_MAX_STUDY_RUNS", "max_expand_s": "COOPLAB_MAX_STUDY_EXPAND_S"}
"""Each limit's operator setting (:class:`jobs.settings.Settings` fields ``max_study_*``)."""


@dataclass(frozen=True)
class StudyLimits:
    """How large one study may be; the defaults are :class:`jobs.settings.Settings`' defaults."""

    max_points: int = 1000
    max_seeds: int = 100
    max_runs: int = 1000
    max_expand_s: float = 60.0


def study_limits(settings: Any) -> StudyLimits:
    """The operator's study limits (``COOPLAB_MAX_STUDY_*``) from a :class:`jobs.settings.Settings`."""
    return StudyLimits(max_points=settings.max_study_points, max_seeds=settings.max_study_seeds,
                       max_runs=settings.max_study_runs, max_expand_s=settings.max_study_expand_s)


def point_count(dims: Sequence[Any], method: str, samples: int) -> int:
    """How many points a study has, without building one: the product of the lists' lengths for a
    grid (ranges are refused by the grid itself, so they count as one here), ``samples`` for random."""
    if method == "random":
        return samples
    return math.prod(len(d.values) for d in dims if d.kind == "values")


def seed_count(seeds: int | Sequence[int]) -> int:
    """How many seeds each point runs with: a count, or the length of a list."""
    return seeds if isinstance(seeds, int) else len(seeds)


def _raise(limit: str) -> str:
    return f"have the operator raise {LIMIT_SETTINGS[limit]}"


def size_problems(dims: Sequence[Any], *, method: str, samples: int, seeds: int | Sequence[int],
                  limits: StudyLimits) -> list[str]:
    """One line per limit the study exceeds (``field: count, over the limit of N; fix, or have the
    operator raise COOPLAB_MAX_STUDY_...``); empty when it fits."""
    points, per_point = point_count(dims, method, samples), seed_count(seeds)
    problems = []
    if points > limits.max_points:
        if method == "random":
            problems.append(f"samples: {points:,} random points, over the limit of {limits.max_points:,} points; "
                            f"ask for fewer, or {_raise('max_points')}")
        else:
            sizes = " x ".join(str(len(d.values)) for d in dims if d.kind == "values")
            problems.append(f"space: the grid makes {points:,} points ({sizes} values), over the limit of "
                            f"{limits.max_points:,} points; search fewer fields or values (or use method: random "
                            f"with samples), or {_raise('max_points')}")
    if per_point > limits.max_seeds:
        problems.append(f"seeds: {per_point:,} seeds per point, over the limit of {limits.max_seeds:,}; run each "
                        f"point with fewer seeds, or {_raise('max_seeds')}")
    runs = points * per_point
    if not problems and runs > limits.max_runs:
        problems.append(f"the study makes {points:,} points x {per_point:,} seeds = {runs:,} runs, over the limit "
                        f"of {limits.max_runs:,} runs; search fewer points or seeds, or {_raise('max_runs')}")
    return problems


def expansion_problem(elapsed_s: float, done: int, total: int, limits: StudyLimits) -> str | None:
    """The refusal of an expansion that has taken longer than ``limits.max_expand_s`` after building
    ``done`` of ``total`` points; None while it is within the limit."""
    if elapsed_s <= limits.max_expand_s:
        return None
    return (f"building the study's configs took more than {limits.max_expand_s:g} s ({done:,} of {total:,} points "
            f"checked); search fewer points, or {_raise('max_expand_s')}")
