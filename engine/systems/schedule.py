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
    """Round-robin between exactly two trainers: one trains while the other is frozen."""

    def trainers_to_update(self, round_index: int, names: Sequence[str]) -> list[str]:
        order = list(self.order) if self.order else list(names)
        if len(order) != 2:
            raise ScheduleError(f"alternating needs exactly 2 trainers, got {len(order)} ({order}); "
                                f"use round_robin for more")
        return super().trainers_to_update(round_index, names)


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
    """Raise :class:`ScheduleError` when the schedule names trainers the system does not have."""
    mentioned: list[str] = []
    if isinstance(schedule, RoundRobin) and schedule.order:
        mentioned = list(schedule.order)
        missing = [n for n in names if n not in schedule.order]
        if missing:
            raise ScheduleError(f"schedule order {mentioned} leaves out trainers {missing}; list each once")
        if len(set(mentioned)) != len(mentioned):
            raise ScheduleError(f"schedule order {mentioned} lists a trainer twice")
    elif isinstance(schedule, EveryK):
        mentioned = list(schedule.every)
    unknown = [m for m in mentioned if m not in names]
    if unknown:
        raise ScheduleError(f"schedule names unknown trainers {unknown}; the trainers are {list(names)}")
    if isinstance(schedule, Alternating) and len(schedule.order or names) != 2:
        raise ScheduleError(f"alternating needs exactly 2 trainers, got {len(schedule.order or names)}; "
                            f"use round_robin for more")


def schedule_function_problem(path: str) -> str | None:
    """Why a config may not name ``path`` as its custom schedule function (None when it may): the
    module must be on the task module allowlist (:mod:`engine.tasks.allowlist`). Imports nothing."""
    from engine.tasks.allowlist import HOW_TO_ALLOW, describe_allowed, import_path_problem

    reason = import_path_problem(path, what="function")
    if reason is None:
        return None
    return (f"custom schedule function {path!r} is not allowed: {reason}; allowed modules: {describe_allowed()}; "
            f"{HOW_TO_ALLOW}")


def load_callable(path: str) -> Callable:
    """``package.module:function`` -> the function (for ``custom`` schedules in config files), from a
    module on the task module allowlist only."""
    problem = schedule_function_problem(path)
    if problem is not None:
        raise ScheduleError(problem)
    module_name, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ScheduleError(f"custom schedule function {path!r} cannot be loaded: {exc}") from None
    from engine.tasks.allowlist import foreign_object_problem

    foreign = foreign_object_problem(fn)
    if foreign is not None:
        raise ScheduleError(f"custom schedule function {path!r} is not allowed: {foreign}")
    if not callable(fn):
        raise ScheduleError(f"custom schedule function {path!r} is not callable")
    return fn
