"""The benchmark workload: agents, data, reward, and the clocks every part uses."""

from __future__ import annotations

import json
import math
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROMPTS = [
    "Describe a sunny day at the market.",
    "Explain why teams share information.",
    "Write about a river in spring.",
    "Tell a short story about two robots.",
    "Summarise the rules of a simple game.",
    "Give advice to a new student.",
]


@dataclass(frozen=True)
class Workload:
    """What every measured part runs (the defaults are the reported benchmark)."""

    arch: str = "llama"
    size: str = "m"
    model: str | None = None  # a model source (built-in name or folder) instead of tiny-{arch}-{size}
    full_length: bool = False  # every completion runs to max_new_tokens (no EOS), so all parts do equal work
    dtype: str | None = None  # weights' dtype for every part (e.g. "bfloat16"); None: the model's own (float32)
    num_agents: int = 2
    num_generations: int = 4
    max_new_tokens: int = 32
    steps: int = 5  # timed steps
    warmup_steps: int = 1  # untimed steps run first (first-call allocations, lazy inits)
    items_per_update: int = 2  # CoMLRL's default rollout_buffer_size
    items_per_step: int = 1  # engine only: items rolled out together (1 = CoMLRL's one item at a time)
    fast_decode: bool = True  # engine only: the lean decoder's fast Llama step (False: the model's forward)
    rollout_dtype: str | None = None  # engine only: sample from a copy in this dtype (engine.trainer.agents)
    # engine only: parallel_training; "mp" puts every agent on the CPU in a thread of its own, "auto" (the
    # default) does so when each agent gets a thread, "none" runs them one after another
    parallel: str = "auto"
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    learning_rate: float = 1e-5
    seed: int = 0
    # torch CPU threads per process: 1 by default, because several processes share the CPU (a
    # multi-threaded run on an oversubscribed machine spends its time spinning, not computing)
    threads: int | None = 1

    @property
    def total_steps(self) -> int:
        return self.warmup_steps + self.steps


def length_ratio_reward(completions1: list[str], completions2: list[str]) -> list[float]:
    """1 when the second reply is 2-3x as long as the first, decaying with the distance otherwise."""
    rewards = []
    for a, b in zip(completions1, completions2, strict=True):
        ratio = len(b) / max(len(a), 1)
        rewards.append(1.0 if 2.0 <= ratio <= 3.0 else math.exp(-min(abs(ratio - 2.0), abs(ratio - 3.0))))
    return rewards


def formatters(num_agents: int) -> list[Any]:
    roles = ["Answer briefly: ", "Answer at length: ", "Add a detail: ", "Conclude: "]
    return [lambda item, role=roles[i % len(roles)]: role + item["prompt"] for i in range(num_agents)]


def dataset(w: Workload) -> list[dict[str, str]]:
    n = w.total_steps * w.items_per_update
    return [{"prompt": PROMPTS[i % len(PROMPTS)]} for i in range(n)]


def setup_agents(w: Workload) -> tuple[list[Any], list[Any]]:
    import torch

    from engine.models.tiny import build_tiny_model

    if w.threads:
        torch.set_num_threads(w.threads)
    if w.model is None:
        pairs = [build_tiny_model(w.arch, w.size, seed=w.seed + i) for i in range(w.num_agents)]
        if w.dtype:
            pairs = [(m.to(getattr(torch, w.dtype)), t) for m, t in pairs]
    else:
        from engine.models import load_agent

        pairs = [load_agent(w.model, dtype=w.dtype) for _ in range(w.num_agents)]
    if w.full_length:
        for model, tokenizer in pairs:
            never_eos(model, tokenizer)
    return [m for m, _ in pairs], [t for _, t in pairs]


NEVER_EOS_TOKEN = "<|bench-no-eos|>"


def never_eos(model: Any, tokenizer: Any) -> None:
    """Make EOS unreachable for ``model``'s sampling (any sampler reading the tokenizer's and the
    generation config's eos): the eos becomes a token added past the model's vocabulary, so every
    completion runs to its length cap. The pad token stays as it was."""
    pad = tokenizer.pad_token
    tokenizer.add_special_tokens({"eos_token": NEVER_EOS_TOKEN})
    if pad is not None:
        tokenizer.pad_token = pad
    vocab = model.get_output_embeddings().weight.shape[0]
    if tokenizer.eos_token_id < vocab:
        raise ValueError(f"cannot make EOS unreachable: the tokenizer's new id {tokenizer.eos_token_id} is inside "
                         f"the model's vocabulary ({vocab} rows)")
    model.generation_config.eos_token_id = tokenizer.eos_token_id


def peak_memory_mb() -> float:
    """Peak resident memory of this process in MiB (peak allocated GPU memory when CUDA is in use)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def clock() -> tuple[float, float]:
    """(wall, CPU) seconds now. CPU time of this process is what the ratios use: other processes on a
    shared machine stretch wall time, not the CPU time a step needs (with one thread per process)."""
    return time.perf_counter(), time.process_time()


def summarize(marks: list[tuple[float, float]], w: Workload) -> dict[str, Any]:
    """Per-step wall and CPU seconds from consecutive clock marks, and their means/medians after warm-up."""
    wall = [b[0] - a[0] for a, b in zip(marks, marks[1:], strict=False)]
    cpu = [b[1] - a[1] for a, b in zip(marks, marks[1:], strict=False)]
    timed_wall, timed_cpu = wall[w.warmup_steps :] or wall, cpu[w.warmup_steps :] or cpu
    return {
        "step_s_mean": statistics.fmean(timed_wall),
        "step_s_median": statistics.median(timed_wall),
        "step_cpu_s_mean": statistics.fmean(timed_cpu),
        "step_cpu_s_median": statistics.median(timed_cpu),
        "step_wall_s": wall,
        "step_cpu_s": cpu,
    }


def run_in_fresh_process(module: str, name: str, workload: dict[str, Any], what: str) -> dict[str, Any]:
    """``python -m <module> --one <name> --workload <json>`` in a new process (its own peak memory), and
    the JSON line it prints last; ``RuntimeError`` naming ``what`` and the child's stderr when it fails."""
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", module, "--one", name, "--workload", json.dumps(workload)]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
