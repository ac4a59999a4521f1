"""Run status vocabulary for the Runs and Run detail views: badges, allowed actions, durations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from db.states import (
    ALL_STATUSES,
    LIVE_STATUSES,
    QUEUED,
    RUNNING,
    STARTING,
    STOPPING,
    TERMINAL_STATUSES,
)

if TYPE_CHECKING:
    from db.records import Run

__all__ = ["ALL_STATUSES", "LIVE_STATUSES", "TERMINAL_STATUSES", "actions_for", "badge", "format_duration",
           "status_markdown"]

# Symbols from the Geometric Shapes and Dingbats blocks that plain text fonts (DejaVu, Liberation)
# carry: they render on a Linux browser without an emoji font, unlike 🟢 or ✅.
_BADGES = {
    QUEUED: "○ queued",
    STARTING: "◔ starting",
    RUNNING: "● running",
    STOPPING: "◑ stopping",
    "succeeded": "✓ succeeded",
    "failed": "✗ failed",
    "stopped": "■ stopped",
    "lost": "◌ lost",
    "cancelled": "⊘ cancelled",
}


_MARKDOWN = {
    QUEUED: ("gray", "schedule"),
    STARTING: ("blue", "rocket_launch"),
    RUNNING: ("green", "play_circle"),
    STOPPING: ("orange", "pending"),
    "succeeded": ("green", "check_circle"),
    "failed": ("red", "error"),
    "stopped": ("gray", "stop_circle"),
    "lost": ("red", "heart_broken"),
    "cancelled": ("gray", "cancel"),
}


def badge(status: str) -> str:
    """The status with a symbol any text font has, for table cells (plain text)."""
    return _BADGES.get(status, status)


def status_markdown(status: str) -> str:
    """The status as coloured markdown with an icon, for headers (``st.metric`` renders it)."""
    color, icon = _MARKDOWN.get(status, ("gray", "help"))
    return f":{color}[:material/{icon}: {status}]"


@dataclass(frozen=True)
class RunActions:
    """Which control buttons a run in a given state offers."""

    stop: bool
    cancel: bool
    resume: bool
    delete: bool


def actions_for(status: str) -> RunActions:
    """Stop while it may be working, cancel while queued, resume and delete once it has ended."""
    return RunActions(
        stop=status in {STARTING, RUNNING},
        cancel=status == QUEUED,
        resume=status in {"stopped", "failed", "lost"},
        delete=status in TERMINAL_STATUSES,
    )


def redraws_page(shown: str, now: str) -> bool:
    """Whether a run page drawn for state ``shown`` must be drawn again now the run is ``now``: its
    buttons differ, or it ended (its live regions stop polling). ``starting`` → ``running`` does not
    (the same Stop button; the live status shows the state), and so the page's whole redraw, in the
    browser as much CPU as opening the page, does not fall on the run's first training steps."""
    return actions_for(shown) != actions_for(now) or (shown in TERMINAL_STATUSES) != (now in TERMINAL_STATUSES)


def format_duration(seconds: float | None) -> str:
    """``1h 02m``, ``3m 05s``, ``42s``; a dash when unknown."""
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def header_step(run: Run, resumed_at: int | None) -> int:
    """The step a run's header shows: its own last logged step, or, for a resumed attempt that has not
    logged one yet, ``resumed_at`` (the step of the checkpoint it continues from), so its progress goes
    on from there instead of starting at 0."""
    if run.resumed_from is not None and run.step == 0 and resumed_at:
        return resumed_at
    return run.step
