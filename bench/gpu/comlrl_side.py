"""CoMLRL 1.4.3's side of the benchmark of record: :mod:`bench.gpu.comlrl_child` in a subprocess, so
that a missing package, a crash or a run past its time limit is reported in the result instead of
ending the benchmark."""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.gpu.roofline import ratio
from bench.gpu.workload import GpuWorkload
from bench.training.vs_comlrl import COMLRL_INSTALL

IMPORTED = ("comlrl", "wandb", "datasets")  # what `from comlrl.trainers.reinforce import ...` needs besides ours
ROOT = Path(__file__).resolve().parents[2]


def comlrl_missing_reason() -> str | None:
    """None when CoMLRL and what it imports at load time can be found; else the reason, naming the
    missing packages and how to install them."""
    missing = [name for name in IMPORTED if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (f"CoMLRL side skipped: {', '.join(missing)} not installed (CoMLRL 1.4.3 is a benchmark-only extra: "
            f"{COMLRL_INSTALL}; on the GPU machine, scripts/fetch_gpu_bench_wheels.sh prepares .whl/)")


def summarize_comlrl(stdout: str, stderr: str, returncode: int | None, w: GpuWorkload, *,
                     timed_out: bool = False) -> dict[str, Any]:
    """The child's event lines as a result: per-step seconds (between consecutive marks, the first
    ``warmup_steps`` dropped), seconds per 1k generated tokens, peak memory; the status says whether
    it finished (``ok``), stopped at its time limit (``timed_out``: the finished steps still count)
    or failed (``failed``, with the end of its stderr)."""
    events = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    marks = [e["t"] for e in events if e.get("event") in ("ready", "step")]
    steps = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    timed = steps[w.warmup_steps:]
    done = next((e for e in events if e.get("event") == "done"), None)
    tokens = w.num_agents * w.comlrl_items * w.num_generations * w.max_new_tokens
    status = "ok" if returncode == 0 and done else "timed_out" if timed_out else "failed"
    step_s = statistics.median(timed) if timed else None
    out: dict[str, Any] = {
        "status": status, "items_per_step": w.comlrl_items, "step_s_all": steps, "step_s": step_s,
        "generated_tokens_per_step": tokens, "s_per_1k_tokens": None if step_s is None else 1000 * step_s / tokens,
        "peak_mem_gib": done.get("peak_mem_gib") if done else None,
        "mean_completion_words": done.get("mean_completion_words") if done else None,
    }  # fmt: skip
    if status != "ok":
        out["reason"] = (f"stopped at its time limit after {len(steps)} step(s)" if timed_out else
                         f"exit {returncode}: {stderr.strip()[-1500:]}")
    return out


def run_comlrl_side(shape: str, w: GpuWorkload, device: str, timeout_s: float) -> dict[str, Any]:
    """CoMLRL on ``shape`` in a subprocess with at most ``timeout_s`` seconds (skipped, with the reason,
    when it is not installed)."""
    reason = comlrl_missing_reason()
    if reason is not None:
        return {"status": "skipped", "reason": reason}
    env = dict(os.environ, WANDB_MODE="disabled", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    import torch

    cmd = [sys.executable, "-m", "bench.gpu.comlrl_child", "--shape", shape, "--device", device,
           "--workload", json.dumps(asdict(w)), "--threads", str(torch.get_num_threads())]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        return summarize_comlrl(_text(exc.stdout), _text(exc.stderr), None, w, timed_out=True)
    return summarize_comlrl(proc.stdout, proc.stderr, proc.returncode, w)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def step_ratio(cooplab_s_per_1k: float | None, comlrl: dict[str, Any]) -> float | None:
    """CoMLRL's whole step over CoopLab's, per generated token (above 1: CoopLab is faster)."""
    return ratio(comlrl.get("s_per_1k_tokens"), cooplab_s_per_1k)
