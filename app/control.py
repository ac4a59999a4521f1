"""Run control from the dashboard: every state-changing action on a run goes through ``jobs.client``.

The dashboard never moves a run's state itself; it asks the job client, which validates, stores
and enqueues (submit), sets the stop flag (stop), or creates a new attempt (resume). ``jobs.client``
is imported when an action is taken, so pages that only read do not load Celery. Failures come back
as :class:`ControlError` with a message the page shows as is.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from engine.schema.run_config import RunConfig

T = TypeVar("T")


class ControlError(RuntimeError):
    """A run action that did not happen; the message says why and what to do."""


def _call(action: str, func: Callable[[], T]) -> T:
    try:
        return func()
    except ValueError as exc:  # invalid config, unknown device, refused transition, nothing to resume
        raise ControlError(f"Could not {action}: {exc}") from exc
    except Exception as exc:  # the broker refused or is unreachable
        raise ControlError(f"Could not {action}: {type(exc).__name__}: {exc}. Is the broker running "
                           "(`cooplab up` or COOPLAB_BROKER_URL)?") from exc


SEED_LIMIT = 2**31 - 1  # every library the engine seeds accepts this range


def draw_seed() -> int:
    """A fresh random seed for a run (from the OS's randomness, so two launches never share one)."""
    return secrets.randbelow(SEED_LIMIT) + 1


def with_seed(config: RunConfig | dict[str, Any], seed: int) -> RunConfig | dict[str, Any]:
    """A copy of ``config`` whose trainer uses ``seed`` (what the stored run records); a validated
    config stays validated (a seed is any integer the draw or a stored run gave), not parsed again."""
    if not isinstance(config, dict):
        return config.model_copy(update={"trainer": config.trainer.model_copy(update={"seed": int(seed)})})
    out = dict(config)
    out["trainer"] = {**dict(out.get("trainer") or {}), "seed": int(seed)}
    return out


def launch(config: RunConfig | dict[str, Any], *, experiment_id: int, device: str = "cpu",
           seed: int | None = None) -> int:
    """Queue a new run of ``config`` on ``device``; returns the new run's id (a
    :class:`jobs.client.QueuedRun`: its ``unsent`` says why the broker has not got it yet, when it is
    down; the run stays queued and is sent when the broker answers).

    ``config`` is the form's validated :class:`RunConfig` when the form holds the saved config (the job
    client checks it without parsing it again), else the stored dict (parsed once, by the client).
    Each run gets its own seed: a fresh random one by default (drawn here and written into the run's
    stored config, so it is recorded and the run can be reproduced), or ``seed`` when given (the
    same seed as an earlier run, or the experiment's own).
    """
    from jobs import client

    chosen = with_seed(config, draw_seed() if seed is None else seed)
    return _call("queue the run", lambda: client.submit_run(chosen, experiment_id=experiment_id, device=device))


def stop(run_id: int) -> None:
    """Ask a starting or running run to stop (it shows ``stopping`` until the worker ends it)."""
    from jobs import client

    _call(f"stop run {run_id}", lambda: client.stop_run(run_id))


def cancel(run_id: int) -> None:
    """Cancel a queued run before a worker picks it up."""
    from jobs import client

    _call(f"cancel run {run_id}", lambda: client.cancel_queued(run_id))


def resume(run_id: int) -> int:
    """Start a new attempt that continues from the run's last checkpoint; returns its id."""
    from jobs import client

    return _call(f"resume run {run_id}", lambda: client.resume_run(run_id))
