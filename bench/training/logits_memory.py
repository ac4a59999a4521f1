"""Peak memory of one update's log-probs and backward with a large vocabulary, before and after chunking.

One agent's training forward over ``batch`` sequences of ``prompt`` + ``completion`` tokens (distinct
random prompts), its completion log-probs and entropy (:meth:`engine.trainer.agents.AgentRuntime.forward_logprobs`,
as the update's first epoch asks), the policy-gradient loss and its backward, on a tiny random Qwen2
(tied embeddings, like Qwen3-0.6B) with Qwen's 151,936-token vocabulary, so that the logits, not the
model, dominate. Variants, each in a fresh Python process so each peak is its own:

- ``before``: ``logits_chunk_mib: 0``, the full-logits path (the model's ``(B, T, V)`` logits, a float32
  copy, the log-sum-exp's temporaries, the float32 logits kept for the backward);
- ``after``: ``logits_chunk_mib`` at ``--budget-mib`` (the default 512): log-probs from the final hidden
  states a chunk of positions at a time (:mod:`engine.trainer.losses`).

Memory: on a CPU the resident set's high-water mark (``VmHWM``, reset before the step where Linux allows
it) less the resident set before the step; on CUDA ``torch.cuda.max_memory_allocated`` less the
memory allocated before the step. Both also report the absolute peak.

    python -m bench.training.logits_memory                                 # B=64, T=256 (a GPU's size)
    python -m bench.training.logits_memory --batch 8 --threads 2           # a CPU with ~8 GiB to spare
    python -m bench.training.logits_memory --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.training.workload import run_in_fresh_process

VARIANTS = ("before", "after")
MIB = 2**20
QWEN_VOCAB = 151_936


@dataclass(frozen=True)
class LogitsWorkload:
    """The model and the batch of one measurement."""

    vocab: int = QWEN_VOCAB
    hidden: int = 64
    layers: int = 2
    batch: int = 64
    completion: int = 256
    prompt: int = 16
    dtype: str = "float32"
    device: str = "cpu"
    budget_mib: int = 512  # the "after" variant's logits_chunk_mib
    threads: int | None = None
    seed: int = 0

    def check(self) -> None:
        """Refuse sizes that cannot run, naming the field."""
        for name in ("vocab", "hidden", "layers", "batch", "completion", "prompt", "budget_mib"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be float32, bfloat16 or float16, got {self.dtype!r}")

    def logits_mib(self) -> float:
        """The float32 logits of the batch's completion positions, the tensor the budget is about."""
        return self.batch * self.completion * self.vocab * 4 / MIB


def _model(w: LogitsWorkload) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("qwen2", vocab_size=w.vocab, hidden_size=w.hidden, intermediate_size=2 * w.hidden,
                                  num_hidden_layers=w.layers, num_attention_heads=4, num_key_value_heads=2,
                                  tie_word_embeddings=True, max_position_embeddings=w.prompt + w.completion,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(w.seed)
        model = AutoModelForCausalLM.from_config(config)
    return model.to(device=w.device, dtype=getattr(torch, w.dtype)).train()


def _batch(w: LogitsWorkload, batch: int, completion: int) -> Any:
    import torch

    from engine.trainer.agents import pack_sequences

    g = torch.Generator().manual_seed(w.seed)
    prompts = torch.randint(3, w.vocab, (batch, w.prompt), generator=g).tolist()  # distinct: no shared prompts
    completions = torch.randint(3, w.vocab, (batch, completion), generator=g).tolist()
    return pack_sequences(prompts, completions, pad_id=0, device=torch.device(w.device))


def _step(agent: Any, batch: Any) -> None:
    """One micro-batch of the update: log-probs and entropy, the loss, its backward."""
    import torch

    from engine.trainer.losses import policy_loss

    agent.model.zero_grad(set_to_none=True)
    logps, _ = agent.forward_logprobs(batch, with_entropy=True)
    adv = torch.linspace(-1.0, 1.0, logps.shape[0], device=logps.device)
    loss, _ = policy_loss(logps, batch.completion_mask, adv)
    loss.backward()


def _status_mib(field: str) -> float:
    """``VmRSS``/``VmHWM`` of this process in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}: the CPU meter needs Linux")


def _reset_cpu_peak() -> bool:
    """Reset the resident high-water mark to the current resident set (Linux 4.0+); False if refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def measure(variant: str, w: LogitsWorkload) -> dict[str, Any]:
    """Run ``variant`` in this process: the step's peak memory over what was in use before it."""
    import torch

    from engine.trainer.agents import AgentRuntime, GenerationSettings

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {list(VARIANTS)}")
    w.check()
    if w.threads:
        torch.set_num_threads(w.threads)
    model = _model(w)
    agent = AgentRuntime(index=0, name="agent", model=model, tokenizer=None, device=torch.device(w.device),
                         learning_rate=0.0, generation=GenerationSettings(w.completion, 1.0, 1.0, None), formatter=None,
                         logits_chunk_mib=0 if variant == "before" else w.budget_mib)
    batch = _batch(w, w.batch, w.completion)
    _step(agent, _batch(w, 1, 2))  # kernels and gradient buffers in place before measuring
    agent.model.zero_grad(set_to_none=True)
    cuda = torch.device(w.device).type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated() / MIB
    else:
        reset = _reset_cpu_peak()
        start = _status_mib("VmRSS")
        if not reset:
            start = max(start, _status_mib("VmHWM"))  # the peak so far cannot be told from the step's
    began = time.perf_counter()
    _step(agent, batch)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    peak = torch.cuda.max_memory_allocated() / MIB if cuda else _status_mib("VmHWM")
    return {"variant": variant, "logits_chunk_mib": agent.logits_chunk_mib,
            "chunked": agent.logits_plan(model, batch) is not None, "meter": "cuda_allocated" if cuda else "cpu_rss",
            "start_mib": start, "peak_mib": peak, "step_peak_mib": peak - start, "step_s": seconds}


def run_variant(variant: str, w: LogitsWorkload, *, isolate: bool = True) -> dict[str, Any]:
    """:func:`measure` in a fresh Python process (its own peak) or, without ``isolate``, here."""
    if not isolate:
        return measure(variant, w)
    module = __spec__.name if __spec__ is not None else "bench.training.logits_memory"
    return run_in_fresh_process(module, variant, asdict(w), f"variant {variant!r}")


def run_logits_bench(w: LogitsWorkload, variants: tuple[str, ...] = VARIANTS, *,
                     isolate: bool = True) -> dict[str, Any]:
    """Every variant in turn (a failed one is reported with its error), and before/after."""
    w.check()
    results: dict[str, Any] = {}
    for name in variants:
        try:
            results[name] = run_variant(name, w, isolate=isolate)
        except (RuntimeError, ValueError) as exc:
            results[name] = {"variant": name, "error": str(exc).strip().splitlines()[-1]}
    before, after = results.get("before", {}), results.get("after", {})
    ratio = before["step_peak_mib"] / after["step_peak_mib"] \
        if "step_peak_mib" in before and after.get("step_peak_mib", 0) > 0 else None
    return {"workload": asdict(w), "logits_mib": w.logits_mib(), "variants": results, "ratio": ratio}


def format_logits_report(result: dict[str, Any]) -> str:
    """One row per variant, then before / after."""
    w = result["workload"]
    lines = [f"log-probs + backward of one micro-batch: B={w['batch']} x T={w['completion']} completion tokens "
             f"(+{w['prompt']} prompt), vocabulary {w['vocab']:,}, hidden {w['hidden']}, {w['layers']} layers, "
             f"{w['dtype']} on {w['device']}; the float32 logits would be {result['logits_mib']:.0f} MiB",
             "", "| variant | logits_chunk_mib | path | step peak MiB (over start) | process peak MiB | step s |",
             "|---|---|---|---|---|---|"]
    for name, r in result["variants"].items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} |")
            continue
        path = "chunked" if r["chunked"] else "full logits"
        lines.append(f"| {name} | {r['logits_chunk_mib']} | {path} | {r['step_peak_mib']:.0f} | {r['peak_mib']:.0f} | "
                     f"{r['step_s']:.2f} |")
    if result["ratio"] is not None:
        lines += ["", f"before / after: {result['ratio']:.1f}x less peak memory for the step"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.training.logits_memory",
                                     description=__doc__.split("\n\n")[0])
    d = LogitsWorkload()
    parser.add_argument("--batch", type=int, default=d.batch, help="sequences in the micro-batch")
    parser.add_argument("--completion", type=int, default=d.completion, help="completion tokens per sequence")
    parser.add_argument("--prompt", type=int, default=d.prompt, help="prompt tokens per sequence")
    parser.add_argument("--vocab", type=int, default=d.vocab)
    parser.add_argument("--hidden", type=int, default=d.hidden)
    parser.add_argument("--layers", type=int, default=d.layers)
    parser.add_argument("--dtype", default=d.dtype, choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--device", default=d.device, help="cpu, cuda, cuda:0, ...")
    parser.add_argument("--budget-mib", type=int, default=d.budget_mib, help="the after variant's logits_chunk_mib")
    parser.add_argument("--threads", type=int, default=d.threads, help="torch CPU threads per process")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {VARIANTS}")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, LogitsWorkload(**json.loads(args.workload)))))
        return 0
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; expected some of {list(VARIANTS)}")
    w = replace(d, batch=args.batch, completion=args.completion, prompt=args.prompt, vocab=args.vocab,
                hidden=args.hidden, layers=args.layers, dtype=args.dtype, device=args.device,
                budget_mib=args.budget_mib, threads=args.threads)
    try:
        w.check()
    except ValueError as exc:
        parser.error(str(exc))
    result = run_logits_bench(w, variants)
    print(json.dumps(result, indent=2) if args.json else format_logits_report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
