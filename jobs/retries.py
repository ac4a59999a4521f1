"""The retry policy: a ``lost`` run with attempts left is queued again from its last checkpoint.

A run config may carry ``retry: {max_attempts: N}`` (:class:`engine.schema.run_config.RetrySpec`; 1, the
default, never retries). When a run of such a config ends ``lost`` (its job process died, or its worker
froze or died past the heartbeat timeout) and its ``attempt`` is below ``N``, a new attempt is queued
that resumes it as ``cooplab resume`` does (``resumed_from``: it continues from the newest checkpoint
along its attempts), with a note on the new attempt saying why::

    attempt 2 of 3: resumed from the checkpoint at step 40 after run 17 was lost at step 41 (no heartbeat
    for more than 60 s)

A run lost before it saved any checkpoint starts over from step 0, and its note says so ("started over
from step 0: no checkpoint was saved").

**Which ends are retried.** Only ``lost``: the machine, not the run, went wrong, and the same attempt on a
healthy worker is expected to get further. Not ``failed`` (a deterministic error in the config, the task
or the code would fail again the same way; ``cooplab resume`` is there when it was not), nor ``stopped``
or ``cancelled`` (a person asked), nor a run lost after someone asked it to stop, nor a run that the
kernel's OOM killer ended (its error starts "out of memory": the same run on the same machine would be
killed again), nor a study's child (its study owns its attempts: ``cooplab study resume``).

**Exactly once.** :meth:`db.store.Store.queue_retry` creates the new attempt and marks the lost run
(``retried_as``) in one transaction, with a compare-and-set on the mark: when two processes settle the
same run at the same moment and both try, one creates the attempt and the other does nothing.

**Who retries.** Whichever process settles the run: :func:`jobs.liveness.look` (``cooplab runs``,
``cooplab stop``, the dashboard's reads) retries the runs it just settled, and every maintenance pass
(workers and ``cooplab up``, :func:`jobs.maintenance.run_maintenance`) retries every lost run not yet
retried, which covers runs a worker settled from its own job watch and a process that died between
settling a run and retrying it. The new attempt is sent like a study's child
(:func:`jobs.client.resend_run`); a broker that is down leaves it ``queued`` and the reconciler
(:mod:`jobs.reconcile`) sends it once the broker is back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from db import states
from db.records import Run
from db.store import Store
from jobs.settings import Settings

log = logging.getLogger(__name__)

OOM_PREFIX = "out of memory"
"""How the error of a run ended by the kernel's OOM killer starts (:mod:`jobs.oom`)."""

MAX_CAUSE_CHARS = 200


def max_attempts(config: Mapping[str, Any]) -> int:
    """The ``retry.max_attempts`` of a stored run config (1 when it has no retry policy)."""
    retry = config.get("retry") if isinstance(config, Mapping) else None
    value = retry.get("max_attempts") if isinstance(retry, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def why_not_retried(run: Run, *, study_child: bool = False) -> str | None:
    """Why ``run`` gets no new attempt from the retry policy, or None when it gets one (pure; see the
    module docstring for the rules)."""
    limit = max_attempts(run.config)
    if run.status != states.LOST:
        return f"it is {run.status}: only lost runs are retried"
    if run.retried_as is not None:
        return f"it was retried already (run {run.retried_as})"
    if limit <= 1:
        return "its config has no retry policy (retry.max_attempts is 1)"
    if run.attempt >= limit:
        return f"it was attempt {run.attempt} of {limit}: no attempt left"
    if run.stop_requested:
        return "someone asked it to stop"
    if (run.error or "").lstrip().lower().startswith(OOM_PREFIX):
        return "it ran out of memory: it would again"
    if study_child:
        return "it is a study's child: its study queues its attempts (cooplab study resume)"
    return None


def lost_cause(error: str | None) -> str:
    """The short cause of a lost run's error, for a note: its first line up to the first ": "
    ("no heartbeat for more than 60 s: the worker died or hung" -> "no heartbeat for more than 60 s")."""
    line = (error or "").strip().splitlines()[0] if (error or "").strip() else ""
    cause = line.split(": ", 1)[0].strip() or "its job is gone"
    return cause if len(cause) <= MAX_CAUSE_CHARS else cause[: MAX_CAUSE_CHARS - 1] + "…"


def retry_note(run: Run, checkpoint_step: int | None) -> str:
    """The note of the attempt that retries lost ``run``, resuming from the checkpoint at
    ``checkpoint_step`` (None: none was saved, it starts over)."""
    attempt, limit = run.attempt + 1, max_attempts(run.config)
    start = ("started over from step 0: no checkpoint was saved" if checkpoint_step is None
             else f"resumed from the checkpoint at step {checkpoint_step}")
    return f"attempt {attempt} of {limit}: {start} after run {run.id} was lost at step {run.step} ({lost_cause(run.error)})"


def _is_study_child(store: Store, run_id: int) -> bool:
    from db.study_store import StudyStore

    return StudyStore(store).trial_of_run(run_id) is not None


def retry_lost_run(store: Store, settings: Settings, run: Run) -> int | None:
    """Queue the retry policy's next attempt of ``run`` when it gets one (:func:`why_not_retried`) and no
    other process queued it first, then send it; returns the new run's id, else None."""
    if why_not_retried(run) is not None or _is_study_child(store, run.id):
        return None
    from jobs.lineage import newest_checkpoint

    checkpoint = newest_checkpoint(store, run, include_self=True)
    new = store.queue_retry(run.id, retry_note(run, checkpoint.step if checkpoint is not None else None))
    if new is None:
        return None  # another process retried it first (or it is no longer lost)
    log.warning("run %s lost: queued run %s, %s", run.id, new.id, new.notes)
    from jobs.client import BrokerUnavailable, resend_run

    try:
        resend_run(new.id, settings=settings, store=store)
    except BrokerUnavailable as exc:  # it stays queued; the reconciler sends it when the broker is back
        log.warning("run %s is queued but not sent yet: %s", new.id, exc)
    return new.id


def retry_lost_runs(store: Store, settings: Settings, run_ids: Iterable[int] | None = None) -> list[int]:
    """Retry the lost runs among ``run_ids`` (every lost run not yet retried when None) that the policy
    retries; returns the new attempts' ids. A run that cannot be retried now (the database is
    unreachable) is logged and left to the next maintenance pass."""
    runs: Iterable[Run | int] = store.lost_runs_not_retried(config_mentions="retry") if run_ids is None else run_ids
    queued = []
    for item in runs:
        try:
            run = item if isinstance(item, Run) else store.get_run(item)
            if max_attempts(run.config) <= 1:
                continue
            new = retry_lost_run(store, settings, run)
        except Exception:  # the next maintenance pass tries again
            log.warning("could not retry lost run %s", getattr(item, "id", item), exc_info=True)
            continue
        if new is not None:
            queued.append(new)
    return queued
