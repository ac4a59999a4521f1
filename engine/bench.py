"""A fixed training benchmark: CoopLab's trainer against bare model calls and, optionally, CoMLRL.

The workload: N agents (tiny random Llamas by default, one seed each), K samples per agent per
prompt, a fixed number of new tokens, single-turn, two dataset items per update (CoMLRL's default
``rollout_buffer_size``), a length-ratio team reward, and a fixed number of timed steps after a
warm-up step. Three measurements, each in its own subprocess so peak memory is per part:

- ``engine``: ``engine.MAGRPOTrainer.train()``; per-step wall time, the trainer's own phase
  timings (generate / reward / update), tokens per second, peak memory;
- ``bare``: the model calls such a step needs and nothing else: per agent and item one Hugging
  Face ``generate`` (K return sequences), then one padded forward + backward over the step's
  completions and one AdamW step. *Engine overhead* = engine step time / bare step time;
- ``comlrl`` (``--vs-comlrl``): CoMLRL 1.4.3's ``MAGRPOTrainer`` on the same models, data, K and
  lengths; per-step time from the wall clock between its updates. *Speed-up* = CoMLRL / engine.

Run ``python -m engine.bench`` or ``cooplab bench``. CoMLRL is an optional benchmark extra:
``pip install --no-deps comlrl==1.4.3 && pip install wandb openai``.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

COMLRL_INSTALL = "pip install --no-deps comlrl==1.4.3 && pip install wandb openai"
PROMPTS = [
    "Describe a sunny day at the market.",
    "Explain why teams share information.",
    "Write about a river in spring.",
    "Tell a short story about two robots.",
    "Summarise the rules of a simple game.",
    "Give advice to a new student.",
]


class ComlrlMissingError(ImportError):
    """CoMLRL is not installed; the message says how to install it for the benchmark."""


@dataclass(frozen=True)
class Workload:
    """What every measured part runs (the defaults are the reported benchmark)."""

    arch: str = "llama"
    size: str = "m"
    num_agents: int = 2
    num_generations: int = 4
    max_new_tokens: int = 32
    steps: int = 5  # timed steps
    warmup_steps: int = 1  # untimed steps run first (first-call allocations, lazy inits)
    items_per_update: int = 2  # CoMLRL's default rollout_buffer_size
    items_per_step: int = 1  # engine only: items rolled out together (1 = CoMLRL's one item at a time)
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


def _formatters(num_agents: int) -> list[Any]:
    roles = ["Answer briefly: ", "Answer at length: ", "Add a detail: ", "Conclude: "]
    return [lambda item, role=roles[i % len(roles)]: role + item["prompt"] for i in range(num_agents)]


def _dataset(w: Workload) -> list[dict[str, str]]:
    n = w.total_steps * w.items_per_update
    return [{"prompt": PROMPTS[i % len(PROMPTS)]} for i in range(n)]


def _setup(w: Workload) -> tuple[list[Any], list[Any]]:
    import torch

    from engine.models.tiny import build_tiny_model

    if w.threads:
        torch.set_num_threads(w.threads)
    pairs = [build_tiny_model(w.arch, w.size, seed=w.seed + i) for i in range(w.num_agents)]
    return [m for m, _ in pairs], [t for _, t in pairs]


def peak_memory_mb() -> float:
    """Peak resident memory of this process in MiB (peak allocated GPU memory when CUDA is in use)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _clock() -> tuple[float, float]:
    """(wall, CPU) seconds now. CPU time of this process is what the ratios use: other processes on a
    shared machine stretch wall time, not the CPU time a step needs (with one thread per process)."""
    return time.perf_counter(), time.process_time()


def _summary(marks: list[tuple[float, float]], w: Workload) -> dict[str, Any]:
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


class _ClockSink:
    """Keeps each step's metrics and the wall time between consecutive steps (reporting included)."""

    def __init__(self) -> None:
        from engine.sinks import MemorySink

        self._memory = MemorySink()
        self.marks: list[tuple[float, float]] = [_clock()]

    def __getattr__(self, name: str) -> Any:  # every other sink call goes to the memory sink
        return getattr(self._memory, name)

    @property
    def steps(self) -> list[Any]:
        return self._memory.steps

    def mark(self) -> None:
        self.marks = [_clock()]

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Any]) -> None:
        self.marks.append(_clock())
        self._memory.log_step(step, env_step, metrics, episodes)


# ---------------------------------------------------------------------------------------------
# the three parts


def run_engine(w: Workload) -> dict[str, Any]:
    """CoopLab's trainer on the workload."""
    from engine import MAGRPOConfig, MAGRPOTrainer

    models, tokenizers = _setup(w)
    config = MAGRPOConfig(
        num_train_epochs=1, agent_learning_rate=w.learning_rate, num_generations=w.num_generations,
        max_new_tokens=w.max_new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, num_turns=1,
        rollout_buffer_size=w.items_per_update, logging_steps=1, eval_interval=0, seed=w.seed,
        max_steps=w.total_steps, items_per_step=w.items_per_step,
    )  # fmt: skip
    sink = _ClockSink()
    trainer = MAGRPOTrainer(
        agents=models, tokenizer=tokenizers, train_dataset=_dataset(w), reward_func=length_ratio_reward,
        formatters=_formatters(w.num_agents), args=config,
    )  # fmt: skip
    sink.mark()
    trainer.train(sink=sink)
    steps = sink.steps[w.warmup_steps :] or sink.steps
    phases = {
        key.split("/")[1]: statistics.fmean(s.metrics[key] for s in steps)
        for key in ("perf/generate_s", "perf/reward_s", "perf/update_s", "perf/step_time_s")
    }
    tokens_per_s = statistics.fmean(s.metrics["perf/tokens_per_s"] for s in steps)
    return {
        **_summary(sink.marks, w),
        "phases": phases,
        "tokens_per_s": tokens_per_s,
        "peak_mem_mb": peak_memory_mb(),
    }


def run_bare(w: Workload) -> dict[str, Any]:
    """Only the model calls a step needs: generate per agent and item, one forward/backward, AdamW."""
    import torch
    from transformers import GenerationConfig

    models, tokenizers = _setup(w)
    formatters = _formatters(w.num_agents)
    data = _dataset(w)
    torch.manual_seed(w.seed)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=w.learning_rate) for m in models]
    gen_config = GenerationConfig(
        max_new_tokens=w.max_new_tokens, do_sample=True, temperature=w.temperature, top_p=w.top_p,
        top_k=w.top_k or 0, num_return_sequences=w.num_generations,
    )  # fmt: skip
    marks, gen_times, update_times = [_clock()], [], []
    for step in range(w.total_steps):
        items = data[step * w.items_per_update : (step + 1) * w.items_per_update]
        gen_s = upd_s = 0.0
        for model, tok, fmt, opt in zip(models, tokenizers, formatters, optimizers, strict=True):
            g0 = time.perf_counter()
            model.eval()
            rows = []
            with torch.inference_mode():
                for item in items:
                    ids = tok(fmt(item), return_tensors="pt")["input_ids"]
                    gen_config.pad_token_id = tok.pad_token_id
                    out = model.generate(
                        input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gen_config
                    )
                    rows.extend(out.tolist())
            model.train()
            g1 = time.perf_counter()
            width = max(len(r) for r in rows)
            batch = torch.tensor([[tok.pad_token_id] * (width - len(r)) + r for r in rows])
            mask = (
                torch.arange(width)[None, :] >= torch.tensor([width - len(r) for r in rows])[:, None]
            ).long()
            logits = model(input_ids=batch, attention_mask=mask).logits[:, -w.max_new_tokens - 1 : -1]
            logp = logits.float().log_softmax(-1).gather(2, batch[:, -w.max_new_tokens :, None]).squeeze(2)
            advantages = torch.linspace(-1.0, 1.0, len(rows))
            loss = -(advantages * logp.sum(dim=1)).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            gen_s += g1 - g0
            upd_s += time.perf_counter() - g1
        marks.append(_clock())
        gen_times.append(gen_s)
        update_times.append(upd_s)
    timed = slice(w.warmup_steps, None)
    phases = {
        "generate_s": statistics.fmean(gen_times[timed]),
        "update_s": statistics.fmean(update_times[timed]),
    }
    return {**_summary(marks, w), "phases": phases, "peak_mem_mb": peak_memory_mb()}


def run_decoders(w: Workload, repeats: int = 6) -> dict[str, Any]:
    """The sampling call alone, the lean decoder against ``generate`` (median CPU s per call), for one
    prompt (a step's item-by-item calls) and for all of a step's prompts at once (batched items)."""
    import torch

    from engine.sampling import generate_completions

    models, tokenizers = _setup(w)
    prompts = [fmt(item) for fmt in _formatters(1) for item in _dataset(w)[: w.items_per_update]]
    settings = {
        "num_samples": w.num_generations, "max_new_tokens": w.max_new_tokens, "temperature": w.temperature,
        "top_p": w.top_p, "top_k": w.top_k,
    }  # fmt: skip
    result: dict[str, Any] = {}
    for label, batch in (("one_prompt", prompts[:1]), ("step_prompts", prompts)):
        cpu: dict[str, list[float]] = {"lean": [], "generate": []}
        for rep in range(repeats + 1):  # the first round warms up
            for decoder in cpu:  # interleaved, so load changes hit both alike
                gen = torch.Generator().manual_seed(rep)
                start = time.process_time()
                generate_completions(
                    models[0], tokenizers[0], batch, decoder=decoder, generator=gen, **settings
                )
                if rep:
                    cpu[decoder].append(time.process_time() - start)
        lean, hf = statistics.median(cpu["lean"]), statistics.median(cpu["generate"])
        result[label] = {
            "prompts": len(batch),
            "lean_cpu_s": lean,
            "generate_cpu_s": hf,
            "lean_speedup": hf / lean,
        }
    return result


def import_comlrl() -> Any:
    """CoMLRL's MAGRPO classes, or ComlrlMissingError with the install command."""
    try:
        from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    except ImportError as exc:
        raise ComlrlMissingError(
            f"--vs-comlrl needs CoMLRL 1.4.3 (a benchmark-only extra, never a runtime dependency): "
            f"{COMLRL_INSTALL}  [{exc}]"
        ) from exc
    return MAGRPOConfig, MAGRPOTrainer


def run_comlrl(w: Workload) -> dict[str, Any]:
    """CoMLRL 1.4.3's MAGRPOTrainer on the same models, data, K and lengths."""
    config_cls, trainer_cls = import_comlrl()
    from datasets import Dataset

    models, tokenizers = _setup(w)
    config = config_cls(
        num_train_epochs=1, agent_learning_rate=w.learning_rate, num_generations=w.num_generations,
        max_new_tokens=w.max_new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, num_turns=1,
        rollout_buffer_size=w.items_per_update, eval_interval=0, logging_steps=1,
    )  # fmt: skip
    trainer = trainer_cls(
        agents=models, tokenizer=tokenizers, train_dataset=Dataset.from_list(_dataset(w)),
        reward_func=length_ratio_reward, formatters=_formatters(w.num_agents), args=config,
        wandb_config=None,
    )  # fmt: skip
    trainer.verbose = False
    # a step ends when the update after every `items_per_update`-th item has run
    marks = [_clock()]
    original = trainer._train_step_returns
    done = {"items": 0}

    def timed_item(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        done["items"] += 1
        if done["items"] % w.items_per_update == 0:
            marks.append(_clock())
        return result

    trainer._train_step_returns = timed_item
    trainer.train()
    return {**_summary(marks, w), "peak_mem_mb": peak_memory_mb()}


PARTS = {"engine": run_engine, "bare": run_bare, "comlrl": run_comlrl, "decoders": run_decoders}


# ---------------------------------------------------------------------------------------------
# orchestration and report


def run_part(part: str, w: Workload, *, isolate: bool = True) -> dict[str, Any]:
    """Run one part, in a fresh Python process when ``isolate`` (own imports and peak memory)."""
    if part not in PARTS:
        raise ValueError(f"unknown bench part {part!r}; expected one of {sorted(PARTS)}")
    if part == "comlrl":
        import_comlrl()  # fail early, with the install hint, before any subprocess starts
    if not isolate:
        return PARTS[part](w)
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "engine.bench", "--part", part, "--workload", json.dumps(asdict(w))]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"bench part {part!r} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _pool(rounds: list[dict[str, Any]], w: Workload) -> dict[str, Any]:
    """One part's rounds merged: the timed steps of every round pooled, other values from round 1."""
    timed = {
        key: [x for r in rounds for x in r[key][w.warmup_steps :]] for key in ("step_wall_s", "step_cpu_s")
    }
    merged = dict(rounds[0])
    merged.update(
        step_s_mean=statistics.fmean(timed["step_wall_s"]),
        step_s_median=statistics.median(timed["step_wall_s"]),
        step_cpu_s_mean=statistics.fmean(timed["step_cpu_s"]),
        step_cpu_s_median=statistics.median(timed["step_cpu_s"]),
        step_wall_s=[x for r in rounds for x in r["step_wall_s"]],
        step_cpu_s=[x for r in rounds for x in r["step_cpu_s"]],
        peak_mem_mb=max(r["peak_mem_mb"] for r in rounds),
        rounds=len(rounds),
    )
    return merged


def run_bench(
    w: Workload, *, vs_comlrl: bool = False, isolate: bool = True, rounds: int = 1
) -> dict[str, Any]:
    """Every part of the benchmark and the derived ratios, as one JSON-able dict.

    With several ``rounds`` the parts run interleaved (engine, batched engine, bare, CoMLRL, then
    again), so a change in the machine's load hits every part alike. Ratios use the median CPU
    seconds per step; wall-clock figures are reported next to them.
    """
    if vs_comlrl:
        import_comlrl()  # fail before the slow parts when CoMLRL is missing
    plan = {
        "engine": ("engine", replace(w, items_per_step=1)),
        "engine_batched": ("engine", replace(w, items_per_step=w.items_per_update)),
        "bare": ("bare", w),
    }
    if vs_comlrl:
        plan["comlrl"] = ("comlrl", w)
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
    for _ in range(rounds):
        for name, (part, workload) in plan.items():
            collected[name].append(run_part(part, workload, isolate=isolate))
    result: dict[str, Any] = {"workload": asdict(w), "rounds": rounds}
    result.update({name: _pool(parts, w) for name, parts in collected.items()})
    result["decoders"] = run_part("decoders", w, isolate=isolate)
    for name in ("engine", "engine_batched"):
        cpu = result[name]["step_cpu_s_median"]
        result[f"overhead_{name}"] = cpu / result["bare"]["step_cpu_s_median"]
        result[f"overhead_{name}_wall"] = result[name]["step_s_median"] / result["bare"]["step_s_median"]
        if vs_comlrl:
            result[f"speedup_{name}"] = result["comlrl"]["step_cpu_s_median"] / cpu
            result[f"speedup_{name}_wall"] = result["comlrl"]["step_s_median"] / result[name]["step_s_median"]
    return result


def format_report(result: dict[str, Any]) -> str:
    """A plain-text table of the benchmark result."""
    w = result["workload"]
    lines = [
        f"workload: {w['num_agents']} agents, tiny-{w['arch']}-{w['size']}, K={w['num_generations']}, "
        f"{w['max_new_tokens']} new tokens, {w['items_per_update']} items per step, "
        f"{w['steps']} timed steps after {w['warmup_steps']} warm-up, x{result.get('rounds', 1)} rounds, "
        f"{w['threads']} thread(s)",
        f"{'':15}{'CPU s/step':>11}{'wall s/step':>12}{'generate s':>11}{'update s':>9}{'peak MiB':>9}"
        "   (medians; phases are wall-clock means)",
    ]
    for name in ("engine", "engine_batched", "bare", "comlrl"):
        part = result.get(name)
        if part is None:
            continue
        phases = part.get("phases", {})
        cells = [f"{phases[k]:.3f}" if k in phases else "-" for k in ("generate_s", "update_s")]
        lines.append(
            f"{name:15}{part['step_cpu_s_median']:>11.3f}{part['step_s_median']:>12.3f}"
            f"{cells[0]:>11}{cells[1]:>9}{part['peak_mem_mb']:>9.0f}"
        )
    for name in ("engine", "engine_batched"):
        text = (
            f"{name}: {result[name]['tokens_per_s']:.0f} generated tokens/s; overhead over bare model calls "
            f"{result[f'overhead_{name}']:.2f}x CPU ({result[f'overhead_{name}_wall']:.2f}x wall)"
        )
        if f"speedup_{name}" in result:
            text += (
                f"; {result[f'speedup_{name}']:.2f}x faster than CoMLRL "
                f"({result[f'speedup_{name}_wall']:.2f}x wall)"
            )
        lines.append(text)
    for dec in (result.get("decoders") or {}).values():
        lines.append(
            f"sampling call ({dec['prompts']} prompt(s) x K): lean decoder {dec['lean_cpu_s']:.3f} CPU s, "
            f"generate {dec['generate_cpu_s']:.3f} CPU s ({dec['lean_speedup']:.2f}x)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--vs-comlrl", action="store_true", help="also run CoMLRL 1.4.3 on the same workload")
    parser.add_argument("--steps", type=int, default=Workload.steps, help="timed steps")
    parser.add_argument("--size", default=Workload.size, help="tiny model size: xs, s or m")
    parser.add_argument("--threads", type=int, default=Workload.threads, help="torch CPU threads per process")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved repetitions of every part")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:  # a subprocess worker: run one part, print its JSON
        w = Workload(**json.loads(args.workload)) if args.workload else Workload()
        print(json.dumps(PARTS[args.part](w)))
        return 0
    w = replace(Workload(), steps=args.steps, size=args.size, threads=args.threads)
    try:
        result = run_bench(w, vs_comlrl=args.vs_comlrl, rounds=args.rounds)
    except ComlrlMissingError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
