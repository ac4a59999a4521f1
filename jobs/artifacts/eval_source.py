"""Where an evaluation job finds a run's config and checkpoint when the run's folder is on another machine.

A worker evaluates a run from its folder when the folder is on this machine (``config.yaml`` and
``checkpoints/``). Otherwise, with a shared artifact store, the checkpoint comes from the store: the
run's checkpoint rows whose upload completed and was checked (their ``artifact_url``), ``last`` being
the newest such row and a step number that row, downloaded into this machine's cache as a resumed
attempt does (:mod:`jobs.artifacts.resume`); the config is the run's stored snapshot, the one its
job trained from. ``best`` needs the run's folder (the best checkpoint is kept beside the others and
recorded in no row), so it is refused there with the choices that work.
"""

from __future__ import annotations

from pathlib import Path

from db.records import Run
from db.store import Store
from jobs.artifacts.errors import NotComplete
from jobs.artifacts.location import cache_path
from jobs.artifacts.resume import stored_key
from jobs.artifacts.store import ArtifactStore


def _not_here(run: Run) -> str:
    return f"run {run.id}'s folder ({run.output_dir or 'none recorded'}) is not on this worker's machine"


def stored_checkpoint(store: Store, run: Run, which: str, artifacts: ArtifactStore | None,
                      cache_dir: str | Path) -> Path:
    """The folder of checkpoint ``which`` (``last``, ``best`` or a step) of ``run``, downloaded from
    ``artifacts`` (None: the embedded store, nothing shared). Raises ``FileNotFoundError`` naming the
    problem and what to do, and the store's errors (naming it) when a download fails."""
    if artifacts is None:
        raise FileNotFoundError(f"{_not_here(run)}, and with the local artifact store checkpoints stay where they "
                                "were written: evaluate it on a worker that shares the data directory, or set "
                                "COOPLAB_ARTIFACTS_URL to a store every worker reaches")
    rows = [row for row in store.list_checkpoints(run.id) if row.artifact_url]
    steps = ", ".join(str(row.step) for row in rows) or "none"
    if str(which) == "best":
        raise FileNotFoundError(f"{_not_here(run)}, and its best checkpoint is kept only there: evaluate it at "
                                f"'last' or at a stored step ({steps}), or on the machine that trained it")
    if not rows:
        raise FileNotFoundError(f"{_not_here(run)}, and none of its checkpoints was completely stored in "
                                f"{artifacts.url}: evaluate it on the machine that trained it")
    if str(which) == "last":
        chosen = rows[-1]
    else:
        found = [row for row in rows if str(row.step) == str(which)]
        if not found:
            raise FileNotFoundError(f"{_not_here(run)}, and checkpoint {which} is not among the checkpoints "
                                    f"stored in {artifacts.url} (steps {steps})")
        chosen = found[0]
    key = stored_key(artifacts, chosen)
    try:
        return artifacts.download_folder(key, cache_path(cache_dir, key))
    except NotComplete as exc:
        raise FileNotFoundError(f"checkpoint {chosen.step} of run {run.id} is no longer complete in "
                                f"{artifacts.url} ({exc}): choose another stored step ({steps})") from exc
