"""One rank of a ``parallel_training: fsdp`` run, as torchrun starts it (:mod:`cooplab.fsdp_launch`):
``python -m cooplab.fsdp_rank RUN.yaml OUTPUT [CHECKPOINT]`` (CHECKPOINT: a sharded checkpoint folder to resume from,
saved at any world size).

Joins the process group from torchrun's environment (gloo on the CPU, NCCL with a GPU per local
rank), with ``COOPLAB_COLLECTIVE_TIMEOUT_S`` (default 600) as the collective timeout, so a frozen rank
fails the others instead of hanging them. Every line it prints starts with ``[rank R]``. Rank 0 trains
into ``OUTPUT`` and reports to the console and ``metrics.jsonl``/``transcripts.jsonl``; the other ranks
write nothing there (their scratch folder is ``OUTPUT/.ranks/rank<R>``).

Under a worker's job (:mod:`jobs.fsdp_job`, ``COOPLAB_FSDP_RUN_ID`` set), rank 0 reports to the run's
database instead, through the job's own sink (:func:`jobs.fsdp_job.rank_zero_sink`: metrics, transcripts,
checkpoints, heartbeat and the stop flag), and writes how training ended to ``OUTPUT/.fsdp/result.json``
for the job. Each rank dies with torchrun (:func:`jobs.torchrun.rank_dies_with_torchrun`) and, with
``COOPLAB_FSDP_PROGRESS`` set, records its step boundaries and a pulse there (:func:`jobs.torchrun.write_progress`,
:func:`jobs.torchrun.start_pulse`).

``COOPLAB_FSDP_FAULT=RANK:STEP:kill|freeze`` (tests): that rank kills (SIGKILL) or stops (SIGSTOP)
itself before step STEP.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO


class _Prefixed:
    """A text stream that starts every line with ``prefix``."""

    def __init__(self, stream: TextIO, prefix: str) -> None:
        self.stream, self.prefix, self.fresh = stream, prefix, True

    def write(self, text: str) -> int:
        for piece in text.splitlines(keepends=True):
            if self.fresh:
                self.stream.write(self.prefix)
            self.stream.write(piece)
            self.fresh = piece.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _fault(rank: int) -> tuple[int, str] | None:
    spec = os.environ.get("COOPLAB_FSDP_FAULT", "")
    if not spec:
        return None
    who, step, how = spec.split(":")
    return (int(step), how) if int(who) == rank else None


def main(argv: list[str]) -> int:
    from jobs.torchrun import rank_dies_with_torchrun

    rank_dies_with_torchrun()  # torchrun gone (killed with its job): no rank is left behind
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    sys.stdout = _Prefixed(sys.stdout, f"[rank {rank}] ")
    sys.stderr = _Prefixed(sys.stderr, f"[rank {rank}] ")
    config_path, out = Path(argv[0]), Path(argv[1])
    resume_from = argv[2] if len(argv) > 2 else None  # a sharded checkpoint folder, saved at any world size

    import torch
    import torch.distributed as dist

    from engine.build.run import run_training
    from engine.distributed.sink import RankSink
    from engine.schema.run_config import load_run_config
    from engine.sinks import ConsoleSink, JsonlSink, MultiSink
    from engine.sinks.base import BaseSink, Sink
    from jobs.settings import get_settings, operator_permissions

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local)
    timeout = datetime.timedelta(seconds=float(os.environ.get("COOPLAB_COLLECTIVE_TIMEOUT_S", "600")))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timeout)
    try:
        settings = get_settings()
        permissions = operator_permissions(settings, os.environ)
        config = load_run_config(config_path, task_modules=permissions.task_modules)
        run_id = os.environ.get("COOPLAB_FSDP_RUN_ID")
        if rank != 0:
            inner: Sink = BaseSink()
        elif run_id:  # a worker's job: the run's database, as a job in one process reports
            from jobs.fsdp_job import rank_zero_sink

            inner = rank_zero_sink(int(run_id), os.environ.get("COOPLAB_FSDP_WORKER") or None)
        else:
            inner = MultiSink(ConsoleSink(), JsonlSink(out))
        sink: Sink = RankSink(inner, rank, world)
        if os.environ.get("COOPLAB_FSDP_PROGRESS"):
            from jobs.torchrun import start_pulse

            start_pulse(Path(os.environ["COOPLAB_FSDP_PROGRESS"]), rank)
            sink = _Progress(sink, Path(os.environ["COOPLAB_FSDP_PROGRESS"]), rank)
        fault = _fault(rank)
        if fault is not None:
            sink = _Faulty(sink, *fault)
        folder = out if rank == 0 else out / ".ranks" / f"rank{rank}"
        result = run_training(config, output_dir=folder, sink=sink, resume_from=resume_from,
                              write_roots=[settings.data_dir, out],
                              read_roots=settings.read_roots, permissions=permissions)
        if rank == 0:
            print(f"{result.status}: step {result.step}, env_step {result.env_step}; outputs in {out} "
                  f"(last checkpoint: {result.last_checkpoint})")
            if run_id:
                from jobs.fsdp_job import finish_rank_zero

                finish_rank_zero(inner)  # type: ignore[arg-type]  # its checkpoints' uploads, then its heartbeat
                ended = {"status": result.status, "step": result.step, "env_step": result.env_step}
                (out / ".fsdp" / "result.json").write_text(json.dumps(ended), encoding="utf-8")
        # Every rank ends its work before any rank tears the group down: a rank destroying its group while
        # a peer still talks to it was seen to abort in gloo's threads ("terminate called without an active
        # exception") after a stop. Only on this path: a rank that raised must not wait for its peers.
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


class _Progress:
    """A sink that records each step boundary this rank reaches, before the collective there."""

    def __init__(self, sink: Any, folder: Path, rank: int) -> None:
        self.sink, self.folder, self.rank, self.reached = sink, folder, rank, 0

    def should_stop(self) -> bool:
        from jobs.torchrun import write_progress

        self.reached += 1
        write_progress(self.folder, self.rank, self.reached)
        return bool(self.sink.should_stop())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)


class _Faulty:
    """A sink that kills or stops its own rank before step ``step`` (``COOPLAB_FSDP_FAULT``)."""

    def __init__(self, sink: Any, step: int, how: str) -> None:
        self.sink, self.step, self.how, self.asked = sink, step, how, 0

    def should_stop(self) -> bool:
        if self.asked == self.step:
            print(f"fault: {self.how} before step {self.step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL if self.how == "kill" else signal.SIGSTOP)
        self.asked += 1
        return bool(self.sink.should_stop())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)(sys.argv[1:]))
