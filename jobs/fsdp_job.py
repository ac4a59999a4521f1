"""A worker's job of a ``parallel_training: fsdp`` run: the job process launches the ranks under torchrun
and supervises them; rank 0 reports to the database itself.

**Who writes what.** Rank 0 trains with a :class:`~jobs.db_sink.DbSink` of its own
(:func:`rank_zero_sink`): the same step transactions, transcripts, checkpoint rows, heartbeat thread,
``starting → running`` move and stop flag as a job in one process, with the same database-outage
retries; its stop answer is broadcast to every rank (:class:`engine.distributed.sink.RankSink`), so a
Stop from the dashboard or ``cooplab stop`` reaches every rank at the same step boundary, the trainer
saves its checkpoint and the run ends ``stopped``. The job process keeps its own sink's heartbeat
beating meanwhile (the ranks spend their first seconds importing torch and building the team), streams
every rank's lines into the run's log, waits for torchrun and then writes the run's end as any job does
(:mod:`jobs.executor`): the state rank 0's trainer ended in (``OUTPUT/.fsdp/result.json``). No relay:
the database is the one channel, as for every other job. With a shared artifact store, rank 0 uploads
each checkpoint folder (every rank's shards) as it is written and waits for the uploads before it ends
(:func:`finish_rank_zero`); the job stores the exports at the end as for any run.

**Failures.** A rank that dies ends the launch at once (torchrun stops the others) and the run
``failed``, its error naming the rank and its exit code (:class:`RanksFailed`); a frozen rank ends the
others' collectives after ``COOPLAB_COLLECTIVE_TIMEOUT_S`` and the run ``failed`` naming the rank left
behind (:mod:`jobs.torchrun`). A job process killed (the stop enforcer's ``SIGKILL`` after the grace
period, out of memory) takes torchrun and the ranks with it; the run is settled as for any job. A
resumed attempt hands its checkpoint to every rank, which load their shards of it (saved at any world
size, :mod:`engine.distributed.checkpoint`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.devices import rank_gpus
from jobs.torchrun import launch, ranks_of

if TYPE_CHECKING:
    from db.store import Store
    from engine.schema.run_config import RunConfig
    from jobs.artifacts.uploads import CheckpointUploads
    from jobs.db_sink import DbSink
    from jobs.settings import Settings

log = logging.getLogger(__name__)
progress = logging.getLogger("cooplab.progress")  # the run's log file only (jobs.db_sink)

RESULT_FILE = "result.json"


class RanksFailed(RuntimeError):
    """A rank of an fsdp run failed; the message names the rank and its exit code or cause."""


@dataclass(frozen=True)
class RanksResult:
    """How rank 0's trainer ended (``completed`` or ``stopped``) and at which step."""

    status: str
    step: int


def torchrun_training(run_id: int, worker: str | None, settings: Settings) -> Any:
    """The job's train function (``train_fn(config, *, output_dir, sink, resume_from)``) for an fsdp run."""
    def train(config: RunConfig, *, output_dir: str, sink: DbSink, resume_from: str | None = None) -> RanksResult:
        return train_under_torchrun(config, output_dir=Path(output_dir), run_id=run_id, worker=worker,
                                    collective_timeout_s=settings.collective_timeout_s, resume_from=resume_from)

    return train


def train_under_torchrun(config: RunConfig, *, output_dir: Path, run_id: int, worker: str | None,
                         collective_timeout_s: float = 600.0, resume_from: str | None = None) -> RanksResult:
    """Launch ``config``'s ranks on this machine and wait for them (see the module docstring)."""
    from engine.schema.run_config import dump_run_config

    nproc = ranks_of(config.trainer.fsdp_ranks)
    _check_devices(config, nproc)
    folder = output_dir / ".fsdp"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULT_FILE).unlink(missing_ok=True)
    config_path = folder / "run.yaml"
    config_path.write_text(dump_run_config(config), encoding="utf-8")
    env = {"COOPLAB_FSDP_RUN_ID": str(run_id), "COOPLAB_FSDP_WORKER": worker or "",
           "COOPLAB_COLLECTIVE_TIMEOUT_S": f"{collective_timeout_s:g}", **rank_gpu_env(config, nproc)}
    log.info("run %s: launching %d ranks with torchrun --standalone --nproc_per_node=%d", run_id, nproc, nproc)
    args = [str(config_path), str(output_dir), *([str(resume_from)] if resume_from is not None else [])]
    result = launch(nproc, args, echo=progress.info, env=env,
                    progress=folder / "progress", frozen_after_s=collective_timeout_s)
    if result.returncode:
        raise RanksFailed(f"{result.describe()} (one of {nproc} ranks under torchrun; the others were stopped, "
                          "every rank's lines are in the run's log)")
    try:
        ended = json.loads((folder / RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RanksFailed(f"the ranks ended well, but rank 0 left no result in {folder / RESULT_FILE} ({exc})") from exc
    log.info("run %s: the ranks ended %s at step %s", run_id, ended["status"], ended["step"])
    return RanksResult(str(ended["status"]), int(ended["step"]))


def _check_devices(config: RunConfig, nproc: int) -> None:
    """A GPU job gives each rank a GPU of its own: refuse more ranks than the job sees (pre-flight refused
    them at submit already when the queue was known: :func:`engine.schema.budget.rank_problems`)."""
    import torch

    if _on_gpu(config) and nproc > torch.cuda.device_count():
        raise ValueError(too_many_ranks(nproc, torch.cuda.device_count()))


def too_many_ranks(nproc: int, gpus: int) -> str:
    """The refusal of ``nproc`` ranks in a job that sees ``gpus`` GPUs, naming the fixes."""
    listed = ",".join(str(i) for i in range(nproc))
    return (f"trainer.fsdp_ranks: {nproc} ranks, one GPU each, but this job sees {gpus} GPU(s) (its worker owns "
            f"{gpus}); submit it to the queue of a worker that owns at least {nproc} GPUs (cooplab worker --device "
            f"cuda:{listed}; cooplab submit --device cuda:{listed}), set fsdp_ranks to at most {gpus}, or run the "
            "config with cooplab train on a machine with that many GPUs (docs/gpu.md)")


def _on_gpu(config: RunConfig) -> bool:
    return str(getattr(config.trainer, "device", "") or "").startswith("cuda")


def rank_gpu_env(config: RunConfig, nproc: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The GPUs a GPU job's ``nproc`` ranks see: the first ``nproc`` of the job's own (the worker's
    ``CUDA_VISIBLE_DEVICES``, :func:`jobs.devices.rank_gpus`), so torchrun's rank ``LOCAL_RANK`` trains on
    ``cuda:<LOCAL_RANK>`` (:mod:`cooplab.fsdp_rank`), the worker's GPU number ``LOCAL_RANK``, and GPUs
    beyond the run's ranks stay free. Nothing for a CPU job (gloo ranks), nor where no worker pinned the
    GPUs (every visible GPU is the job's)."""
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if not _on_gpu(config) or visible is None:
        return {}
    return {"CUDA_VISIBLE_DEVICES": rank_gpus(visible, nproc)}


# ------------------------------------------------------------------------------------------- rank 0


def rank_zero_sink(run_id: int, worker: str | None) -> DbSink:
    """Rank 0's sink under a job: the run's :class:`~jobs.db_sink.DbSink`, built as the job builds its own,
    with its step lines on standard output (which the job streams into the run's log). When the run is
    settled elsewhere (stopped after the grace period, lost) rank 0 exits, and torchrun stops the others."""
    from db.store import Store
    from jobs.db_identity import DatabaseFile
    from jobs.db_sink import DbSink
    from jobs.settings import get_settings

    settings = get_settings()
    store = Store(settings.resolved_database_url)
    try:
        database_file: DatabaseFile | None = DatabaseFile.of(store)
    except Exception:  # a safeguard only, as in the job (jobs.executor)
        database_file = None
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    progress.addHandler(handler)
    return DbSink(store, run_id, worker=worker, heartbeat_interval_s=settings.heartbeat_interval_s,
                  on_settled=_exit_rank, outage_s=settings.db_outage_s, database_file=database_file,
                  uploads=_checkpoint_uploads(settings, store, run_id))


def _checkpoint_uploads(settings: Settings, store: Store, run_id: int) -> CheckpointUploads | None:
    """Rank 0's upload thread of the run's checkpoints, as the job builds one (:mod:`jobs.executor`);
    None with the embedded store."""
    from jobs.artifacts import open_store

    artifacts = open_store(settings)
    if artifacts.in_data_dir:
        return None
    from jobs.artifacts.storing_marks import StoringMarks
    from jobs.artifacts.uploads import CheckpointUploads

    return CheckpointUploads(artifacts, run_id, progress=StoringMarks(lambda: store.note_storing(run_id)),
                             outage_s=settings.store_outage_s,
                             noted=lambda problem: store.note_store_outage(run_id, problem))


def finish_rank_zero(sink: DbSink) -> None:
    """After rank 0 trained: wait for its checkpoints' uploads (raising the failure, if any), then stop."""
    try:
        if sink.uploads is not None:
            sink.uploads.finish()
    finally:
        if sink.uploads is not None:
            sink.uploads.close()
        sink.close()


def _exit_rank(status: str) -> None:
    log.error("this run was marked %s elsewhere while its ranks still trained: rank 0 exits", status)
    logging.shutdown()
    os._exit(1)
