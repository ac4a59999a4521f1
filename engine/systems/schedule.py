"""Update schedules of a system of trainers: which trainers update after each round.

A schedule is data (built from a validated spec) with one question to answer:
``trainers_to_update(round_index, names) -> list[str]`` (0-based rounds). Every trainer plays in
every round; only the scheduled ones take an update step from that round's scored rollout, the
others stay frozen. Torch-free and pure, so schedules are checked by hand in the tests.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from engine.permissions.task_modules import foreign_object_problem, schedule_function_problem
from engine.schema.system_spec import schedule_problems


class ScheduleError(ValueError):
    """A schedule that does not fit the system's trainers; the message names the problem and fix."""


@dataclass(frozen=True)
class AllTogether:
    """Every trainer updates every round."""

    def trainers_to_update(self, round_index: int, names: Sequence[str]) -> list[str]:
        return list(names)


@dataclass(frozen=True)
class RoundRobin:
    """One trainer at a time, in ``order`` (default: the system's order), ``phase_length`` rounds each."""

    phase_length: int = 1
    order: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.phase_length < 1:
            raise ScheduleError(f"phase_length must be >= 1, got {self.phase_length}")

    def trainers_to_update(self, round_index: int, names: Sequence[str]) -> list[str]:
        order = list(self.order) if self.order else list(names)
        return [order[(round_index // self.phase_length) % len(order)]]


@dataclass(frozen=True)
class Alternating(RoundRobin):
    """Round-robin between exactly two trainers (:func:`check_schedule`): one trains while the other is
    frozen."""


@dataclass(frozen=True)
class EveryK:
    """Trainer ``name`` updates after every ``every[name]``-th round (rounds k-1, 2k-1, ...);
    trainers not listed update every round."""

    every: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = {k: v for k, v in self.every.items() if not isinstance(v, int) or v < 1}
        if bad:
            raise ScheduleError(f"every_k intervals must be integers >= 1, got {bad}")

    def trainers_to_update(self, round_index: int, names: Sequence[str]) -> list[str]:
        return [n for n in names if (round_index + 1) % self.every.get(n, 1) == 0]


@dataclass(frozen=True)
class Custom:
    """A callable ``fn(round_index, names) -> iterable of trainer names`` decides."""

    fn: Callable[[int, list[str]], Iterable[str]]

    def trainers_to_update(self, round_index: int, names: Sequence[str]) -> list[str]:
        chosen = list(self.fn(round_index, list(names)))
        unknown = [c for c in chosen if c not in names]
        if unknown:
            raise ScheduleError(f"custom schedule returned unknown trainers {unknown} at round {round_index}; "
                                f"the trainers are {list(names)}")
        return [n for n in names if n in chosen]


Schedule = AllTogether | RoundRobin | Alternating | EveryK | Custom


def check_schedule(schedule: Schedule, names: Sequence[str]) -> None:
    """Raise :class:`ScheduleError` when the schedule does not fit the trainers ``names`` (the rules of
    :func:`engine.schema.system_spec.schedule_problems`, which checks a run config's schedule too)."""
    order = (schedule.order or None) if isinstance(schedule, RoundRobin) else None  # Alternating is a RoundRobin
    every = schedule.every if isinstance(schedule, EveryK) else None
    problems = schedule_problems(order, every, names, alternating=isinstance(schedule, Alternating))
    if problems:
        field_name, message = problems[0]
        raise ScheduleError(f"schedule {field_name}: {message}")


def load_callable(path: str, allowed: tuple[str, ...] = ()) -> Callable:
    """``package.module:function`` -> the function (for ``custom`` schedules in config files), from a
    module on the task module allowlist ``allowed`` only (the operator's; empty by default)."""
    problem = schedule_function_problem(path, allowed)
    if problem is not None:
        raise ScheduleError(problem)
    module_name, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ScheduleError(f"custom schedule function {path!r} cannot be loaded: {exc}") from None
    foreign = foreign_object_problem(fn, allowed)
    if foreign is not None:
        raise ScheduleError(f"custom schedule function {path!r} is not allowed: {foreign}")
    if not callable(fn):
        raise ScheduleError(f"custom schedule function {path!r} is not callable")
    return fn
