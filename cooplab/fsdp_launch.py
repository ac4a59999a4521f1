"""Launching a ``parallel_training: fsdp`` run: ``torchrun --standalone --nproc_per_node=N`` as a
subprocess running :mod:`cooplab.fsdp_rank` on every rank, every rank's lines streamed (each prefixed
``[rank R]``), and the result: 0 when every rank ended well, else the exit status with the rank that
failed first and its cause (from torchrun's own report: it stops the other ranks as soon as one dies).
A rank that freezes ends the others' collectives after ``COOPLAB_COLLECTIVE_TIMEOUT_S`` seconds (600 by
default; :mod:`cooplab.fsdp_rank`), which then fail, so the launch never waits forever.

Several nodes: the same entry point under torchrun's rendezvous (docs/gpu.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

RANK_ENTRY = "cooplab.fsdp_rank"


@dataclass(frozen=True)
class LaunchResult:
    """How a launch ended: torchrun's exit status, and when it failed, the first failed rank and why."""

    returncode: int
    failed_rank: int | None = None
    cause: str = ""

    def describe(self) -> str:
        if self.returncode == 0:
            return "every rank ended well"
        who = f"rank {self.failed_rank}" if self.failed_rank is not None else "a rank"
        return f"{who} failed: {self.cause or f'torchrun exited with {self.returncode}'}"


def torchrun_command(nproc: int, args: Sequence[str]) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc_per_node=N -m cooplab.fsdp_rank ARGS``."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", RANK_ENTRY, *args]


_ENTRY = re.compile(r"^\[\d+\]:\s*$")
_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
_TRACE = re.compile(r"^\s*traceback\s*:\s*(.*)$")


def _entries(lines: Sequence[str]) -> list[tuple[int, int | None, str]]:
    """``(rank, exit code, last line of its traceback)`` of each ``[i]:`` entry of a torchrun report."""
    out: list[tuple[int, int | None, str]] = []
    rank: int | None = None
    code: int | None = None
    trace: list[str] = []
    tracing = False

    def close() -> None:
        if rank is not None:
            last = next((t.strip() for t in reversed(trace) if t.strip() and not set(t.strip()) <= set("^~")), "")
            out.append((rank, code, last))

    for line in lines:
        if _ENTRY.match(line) or line.startswith(("---", "===")):
            close()
            rank, code, trace, tracing = None, None, [], False
        elif tracing:
            trace.append(line)
        elif m := _RANK.match(line):
            rank = int(m.group(1))
        elif m := _EXIT.match(line):
            code = int(m.group(1))
        elif m := _TRACE.match(line):
            trace, tracing = [m.group(1)], True
    close()
    return out


def failure_of(lines: Sequence[str]) -> tuple[int | None, str]:
    """The first failed rank and its cause (the last line of its traceback) from torchrun's report (its
    ``Root Cause`` section), followed by the other ranks that ended badly (``Failures``)."""
    root_at = next((i for i, line in enumerate(lines) if line.startswith("Root Cause")), None)
    if root_at is None:
        return None, ""
    failures_at = next((i for i in range(root_at, -1, -1) if lines[i].startswith("Failures:")), root_at)
    root = _entries(lines[root_at:])
    if not root:
        return None, ""
    rank, code, why = root[0]
    cause = f"exit code {code}" if code is not None else "failed"
    if why and why != "<N/A>":
        cause += f" ({why})"
    if "Timed out" in why or "timed out" in why:
        cause += "; a collective timed out: another rank stopped answering (COOPLAB_COLLECTIVE_TIMEOUT_S)"
    others = [f"rank {r} exit code {c}" for r, c, _ in _entries(lines[failures_at:root_at]) if r != rank]
    if others:
        cause += "; then " + ", ".join(others)
    return rank, cause


def launch(nproc: int, args: Sequence[str], *, echo: Callable[[str], None] = print,
           env: dict[str, str] | None = None, cwd: str | Path | None = None) -> LaunchResult:
    """Run the ranks and stream their lines to ``echo`` until torchrun exits (see the module docstring)."""
    env = {**os.environ, **(env or {})}
    env.setdefault("PYTHONUNBUFFERED", "1")
    tail: list[str] = []
    with subprocess.Popen(torchrun_command(nproc, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env, cwd=cwd, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            echo(line)
            tail.append(line)
            del tail[:-400]
        code = proc.wait()
    if code == 0:
        return LaunchResult(0)
    rank, cause = failure_of(tail)
    return LaunchResult(code, rank, cause)


def ranks_of(fsdp_ranks: int | None) -> int:
    """The ranks a run launches: ``fsdp_ranks``, else one per visible GPU (one on a CPU-only machine)."""
    if fsdp_ranks:
        return fsdp_ranks
    import torch

    return max(1, torch.cuda.device_count())


def launch_run(config: object, out: Path, *, echo: Callable[[str], None] = print,
               err: Callable[[str], None] = print) -> int:
    """``cooplab train``'s launch of an fsdp run config (already validated and pre-flighted): its
    effective config written to ``OUTPUT/.fsdp/run.yaml`` for the ranks, then :func:`launch`. Returns
    the command's exit status (0, or 1 with the failed rank named)."""
    from engine.schema.run_config import RunConfig, dump_run_config

    assert isinstance(config, RunConfig)
    path = out / ".fsdp" / "run.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_run_config(config), encoding="utf-8")
    nproc = ranks_of(config.trainer.fsdp_ranks)
    echo(f"fsdp: launching {nproc} ranks with torchrun --standalone --nproc_per_node={nproc}")
    result = launch(nproc, [str(path), str(out)], echo=echo)
    if result.returncode:
        err(f"failed: {result.describe()}")
        return 1
    return 0
