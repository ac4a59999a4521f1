"""Memory benchmark: peak memory and step time of a two-agent team in each memory configuration.

The configurations (``CONFIGS``), each run in its own Python process so its peak memory is its own:

- ``full``: each agent its own copy of the model, every weight trained (float32);
- ``shared``: one model object for both agents (``share_weights_with``): weights and gradients once,
  an AdamW state per agent;
- ``lora_shared``: a LoRA adapter per agent (``--lora-rank``, peft's default targets) on one frozen
  base (:mod:`engine.lora`);
- ``grad_ckpt``: ``full`` with gradient checkpointing in the update;
- ``bf16``: ``full`` with bfloat16 weights (CPU bfloat16 matmuls are slow without bfloat16
  instructions, AMX or AVX512-BF16: expect a smaller footprint and a slower step there; on a GPU it
  is the usual choice);
- ``rollout_bf16``: ``full`` (float32 training) sampling from a bfloat16 copy of each agent's weights
  (``rollout_dtype``, :mod:`engine.trainer.agents`); the copies' size is reported beside the
  weights.

Each runs the MAGRPO trainer on the benchmark workload (``bench.training.workload``: K samples per
agent, a completion length cap, a length-ratio reward) for warm-up + timed steps and reports: peak
memory (peak resident set on CPU, peak allocated on CUDA; the same meter right after loading is in
the JSON as ``loaded_mem_mb``, though a CPU maps safetensors weights lazily), the team's weights
and optimizer states by :func:`engine.lora.team_memory` (shared tensors counted once), trainable
parameters, the median step time (wall and CPU) with its generate/update phases, and the tokens a
step generated (completions stop at EOS, so configurations may differ in work: compare per token).

``python -m bench.training.memory --model builtin:smollm2-135m`` (or a tiny built-in, or a
``save_pretrained`` folder). Timings on a shared machine are noisy; peak memory is not.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from bench.training.workload import (
    Workload,
    dataset,
    formatters,
    length_ratio_reward,
    peak_memory_mb,
    run_in_fresh_process,
    summarize,
)

CONFIGS = ("full", "shared", "lora_shared", "grad_ckpt", "bf16", "rollout_bf16")
MIB = 2**20


@dataclass(frozen=True)
class MemoryWorkload:
    """What one configuration runs: the model source and the step's size."""

    model: str = "builtin:tiny-llama-m"
    steps: int = 2
    warmup_steps: int = 1
    num_generations: int = 4
    max_new_tokens: int = 16
    items_per_update: int = 1
    lora_rank: int = 8
    device: str = "cpu"
    threads: int | None = 1
    seed: int = 0

    def workload(self) -> Workload:
        return Workload(num_agents=2, num_generations=self.num_generations, max_new_tokens=self.max_new_tokens,
                        steps=self.steps, warmup_steps=self.warmup_steps, items_per_update=self.items_per_update,
                        threads=self.threads, seed=self.seed)


def build_team(name: str, mw: MemoryWorkload) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """The two agents' models and tokenizers of configuration ``name``, and its trainer settings."""
    from engine.models import load_agent

    if name not in CONFIGS:
        raise ValueError(f"unknown memory configuration {name!r}; expected one of {list(CONFIGS)}")
    dtype = "bfloat16" if name == "bf16" else "float32"
    first, tok = load_agent(mw.model, device=mw.device, dtype=dtype)
    if name in ("shared", "lora_shared"):
        models = [first, first]
    else:
        second, _ = load_agent(mw.model, device=mw.device, dtype=dtype)
        models = [first, second]
    if name == "lora_shared":
        from engine.lora import LoraSettings, lora_team

        models = lora_team(models, [LoraSettings(rank=mw.lora_rank)] * 2, seed=mw.seed)
    settings = {"gradient_checkpointing": name == "grad_ckpt",
                "rollout_dtype": "bfloat16" if name == "rollout_bf16" else None}
    return models, [tok, tok], settings


def measure(name: str, mw: MemoryWorkload) -> dict[str, Any]:
    """Run configuration ``name`` in this process and report its memory and step times."""
    import torch

    from bench.training.parts import _ClockSink
    from engine import MAGRPOConfig, MAGRPOTrainer
    from engine.lora import team_memory

    w = mw.workload()
    if w.threads:
        torch.set_num_threads(w.threads)
    models, tokenizers, settings = build_team(name, mw)
    loaded_mb = peak_memory_mb()  # the same meter as the final peak: the peak so far, after loading
    config = MAGRPOConfig(
        num_train_epochs=1, agent_learning_rate=w.learning_rate, num_generations=w.num_generations,
        max_new_tokens=w.max_new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, num_turns=1,
        rollout_buffer_size=w.items_per_update, logging_steps=1, eval_interval=0, seed=w.seed,
        max_steps=w.total_steps, agent_devices=[mw.device], **settings,
    )  # fmt: skip
    trainer = MAGRPOTrainer(agents=models, tokenizer=tokenizers, train_dataset=dataset(w),
                            reward_func=length_ratio_reward, formatters=formatters(2), args=config)
    sink = _ClockSink()
    sink.mark()
    trainer.train(sink=sink)
    accounted = team_memory([a.model for a in trainer.agents], [a.optimizer for a in trainer.agents])
    copies = {id(a.rollout_copy): a.rollout_copy for a in trainer.agents if a.rollout_copy is not None}
    copy_bytes = sum(t.numel() * t.element_size() for c in copies.values() for t in c.model.parameters())
    steps = sink.steps[w.warmup_steps:] or sink.steps
    phases = {key.split("/")[1]: statistics.fmean(s.metrics[key] for s in steps)
              for key in ("perf/generate_s", "perf/update_s")}
    tokens = statistics.fmean(s.metrics["perf/tokens_per_s"] * s.metrics["perf/generate_s"] for s in steps)
    return {
        "config": name, **summarize(sink.marks, w), "phases": phases, "tokens_per_step": tokens,
        "peak_mem_mb": peak_memory_mb(), "loaded_mem_mb": loaded_mb,
        "weights_mb": accounted.weight_bytes / MIB, "unshared_weights_mb": accounted.unshared_weight_bytes / MIB,
        "optimizer_mb": accounted.optimizer_bytes / MIB, "rollout_copy_mb": copy_bytes / MIB, "trainable_m": accounted.trainable_bytes
        / next(p.element_size() for p in trainer.agents[0].model.parameters() if p.requires_grad) / 1e6,
    }  # fmt: skip


def run_config(name: str, mw: MemoryWorkload, *, isolate: bool = True) -> dict[str, Any]:
    """:func:`measure` in a fresh Python process (its own peak memory) or, without ``isolate``, here."""
    if not isolate:
        return measure(name, mw)
    module = __spec__.name if __spec__ is not None else "bench.training.memory"  # this module, wherever it lives
    return run_in_fresh_process(module, name, asdict(mw), f"memory configuration {name!r}")


def run_memory_bench(mw: MemoryWorkload, configs: tuple[str, ...] = CONFIGS, *,
                     isolate: bool = True) -> dict[str, Any]:
    """Every configuration in turn; a configuration that cannot run (e.g. peft missing) is reported
    with its error instead of stopping the others."""
    results: dict[str, Any] = {}
    for name in configs:
        try:
            results[name] = run_config(name, mw, isolate=isolate)
        except (RuntimeError, ImportError, ValueError) as exc:
            results[name] = {"config": name, "error": str(exc).strip().splitlines()[-1]}
    return {"workload": asdict(mw), "configs": results}


def format_memory_report(result: dict[str, Any]) -> str:
    """The table: one row per configuration."""
    mw = result["workload"]
    lines = [f"memory benchmark: 2 agents of {mw['model']} on {mw['device']}, K={mw['num_generations']}, "
             f"{mw['max_new_tokens']} new tokens, {mw['items_per_update']} item(s) per step, "
             f"{mw['steps']} timed step(s) after {mw['warmup_steps']} warm-up, {mw['threads']} thread(s)",
             "", "| config | peak MiB | weights MiB (once / unshared) | optimizer MiB | trainable M | "
             "step s (median) | step CPU s | generate s | update s | tokens/step |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in result["configs"].items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} |")
            continue
        copy_cell = f" (+{r['rollout_copy_mb']:.1f} sampling copies)" if r.get("rollout_copy_mb") else ""
        lines.append(f"| {name} | {r['peak_mem_mb']:.0f} | {r['weights_mb']:.1f} / {r['unshared_weights_mb']:.1f}{copy_cell} | "
                     f"{r['optimizer_mb']:.1f} | {r['trainable_m']:.2f} | {r['step_s_median']:.2f} | "
                     f"{r['step_cpu_s_median']:.2f} | {r['phases']['generate_s']:.2f} | "
                     f"{r['phases']['update_s']:.2f} | {r['tokens_per_step']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training.memory", description=__doc__.split("\n\n")[0])
    defaults = MemoryWorkload()
    parser.add_argument("--model", default=defaults.model, help="built-in name or save_pretrained folder")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated subset of {CONFIGS}")
    parser.add_argument("--steps", type=int, default=defaults.steps, help="timed steps")
    parser.add_argument("--warmup", type=int, default=defaults.warmup_steps, help="untimed steps first")
    parser.add_argument("--k", type=int, default=defaults.num_generations, help="samples per agent per item")
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    parser.add_argument("--items", type=int, default=defaults.items_per_update, help="dataset items per step")
    parser.add_argument("--lora-rank", type=int, default=defaults.lora_rank)
    parser.add_argument("--device", default=defaults.device, help="cpu, cuda, cuda:0, ...")
    parser.add_argument("--threads", type=int, default=defaults.threads, help="torch CPU threads per process")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--one", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, MemoryWorkload(**json.loads(args.workload)))))
        return 0
    configs = tuple(c.strip() for c in args.configs.split(",") if c.strip())
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configurations {unknown}; expected some of {list(CONFIGS)}")
    mw = replace(defaults, model=args.model, steps=args.steps, warmup_steps=args.warmup, num_generations=args.k,
                 max_new_tokens=args.max_new_tokens, items_per_update=args.items, lora_rank=args.lora_rank,
                 device=args.device, threads=args.threads)
    result = run_memory_bench(mw, configs)
    print(json.dumps(result, indent=2) if args.json else format_memory_report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
