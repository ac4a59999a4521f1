"""Launching a ``parallel_training: fsdp`` run from ``cooplab train``: its config written for the ranks,
then ``torchrun --standalone --nproc_per_node=N`` running :mod:`cooplab.fsdp_rank` on every rank
(:mod:`jobs.torchrun`, shared with the worker's jobs: every rank's lines streamed, each prefixed
``[rank R]``, and the result: 0 when every rank ended well, else the rank that failed first and its
cause). A rank that freezes ends the others' collectives after ``COOPLAB_COLLECTIVE_TIMEOUT_S`` seconds
(600 by default; :mod:`cooplab.fsdp_rank`), which then fail, so the launch never waits forever.

Several nodes: the same entry point under torchrun's rendezvous (docs/gpu.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jobs.torchrun import RANK_ENTRY, LaunchResult, failure_of, launch, ranks_of, torchrun_command

__all__ = ["RANK_ENTRY", "LaunchResult", "failure_of", "launch", "launch_run", "ranks_of", "torchrun_command"]


def launch_run(config: object, out: Path, *, echo: Callable[[str], None] = print,
               err: Callable[[str], None] = print, resume: Path | None = None) -> int:
    """``cooplab train``'s launch of an fsdp run config (already validated and pre-flighted): its
    effective config written to ``OUTPUT/.fsdp/run.yaml`` for the ranks, then :func:`launch` (``resume``: a
    sharded checkpoint folder every rank loads its shards of). Returns
    the command's exit status (0, or 1 with the failed rank named)."""
    from engine.schema.run_config import RunConfig, dump_run_config
    from jobs.settings import get_settings

    assert isinstance(config, RunConfig)
    path = out / ".fsdp" / "run.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_run_config(config), encoding="utf-8")
    nproc = ranks_of(config.trainer.fsdp_ranks)
    echo(f"fsdp: launching {nproc} ranks with torchrun --standalone --nproc_per_node={nproc}")
    timeout = get_settings().collective_timeout_s  # COOPLAB_COLLECTIVE_TIMEOUT_S: the ranks' too
    args = [str(path), str(out), *([str(resume)] if resume is not None else [])]
    result = launch(nproc, args, echo=echo, env={"COOPLAB_COLLECTIVE_TIMEOUT_S": f"{timeout:g}"},
                    progress=out / ".fsdp" / "progress", frozen_after_s=timeout)
    if result.returncode:
        err(f"failed: {result.describe()}")
        return 1
    return 0
