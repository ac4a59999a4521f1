"""One sampling call on the record's batch (``prompts x K`` rows, ``max_new_tokens`` each): the engine's
sampler (the lean decoder, as the trainer calls it) against Hugging Face ``generate``, the seconds
per decode step, and the same call in float32. The sampler's two token loops are timed apart:
``static`` (:mod:`engine.sampling.static_decode`: static KV cache, CUDA graphs on a GPU, no host wait per
token; ``decode_graphs`` on) and ``loop`` (the lean decoder's loop; ``decode_graphs`` off); ``lean_*``
is the one the default (``auto``: static on CUDA) takes."""

from __future__ import annotations

import functools
import time
from typing import Any

from bench.gpu.cooplab_side import peak_memory, reset_peak_memory, synchronize
from bench.gpu.roofline import per_decode_step_s, ratio
from bench.gpu.workload import GpuWorkload


def timed(device: str, fn: Any) -> tuple[float, Any]:
    """(seconds, result) of ``fn()``, the device synchronised before and after."""
    synchronize(device)
    started = time.perf_counter()
    result = fn()
    synchronize(device)
    return time.perf_counter() - started, result


def lean_call(model: Any, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload, new_tokens: int,
              decode_graphs: str = "auto") -> Any:
    """The engine's sampling call (:func:`engine.sampling.sampler.generate_completions`), seeded."""
    import torch

    from engine.sampling.sampler import generate_completions

    device = next(model.parameters()).device
    return generate_completions(model, tokenizer, prompt_ids, num_generations=w.num_generations,
                                max_new_tokens=new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k,
                                generator=torch.Generator(device=device).manual_seed(w.seed),
                                decode_graphs=decode_graphs)


def token_loops(model: Any, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload,
                device: str) -> dict[str, tuple[dict[str, Any], Any]]:
    """The full sampling call through each token loop, after a warm-up call (the static path's is full
    length, so every CUDA graph of the call is captured before the timed one, as in a training run
    after its first step). Per loop: (figures, generation)."""
    from engine.sampling.static_decode import last_decode_stats

    new = w.max_new_tokens
    out: dict[str, tuple[dict[str, Any], Any]] = {}
    for path, graphs in (("static", "on"), ("loop", "off")):
        warm_s, _ = timed(device, lambda g=graphs: lean_call(model, tokenizer, prompt_ids, w,
                                                             new if g == "on" else min(2, new), g))
        first = last_decode_stats(model) if path == "static" else None
        reset_peak_memory(device)
        full_s, gen = timed(device, lambda g=graphs: lean_call(model, tokenizer, prompt_ids, w, new, g))
        peak, _ = peak_memory(device)
        figures: dict[str, Any] = {"s": full_s, "tokens": gen.num_tokens, "tokens_per_s": ratio(gen.num_tokens, full_s),
                                   "peak_mem_gib": peak, "warmup_s": warm_s}
        if path == "static":
            stats = last_decode_stats(model)  # None: the model went through the lean loop (not supported)
            figures.update(used=stats is not None, step_s=stats.step_s if stats else None,
                           rows=stats.rows if stats else None, bucket=stats.bucket if stats else None,
                           graphs_captured_warmup=first.graphs_captured if first else None,
                           graphs_captured_timed=stats.graphs_captured if stats else None)
        out[path] = (figures, gen)
    return out


def hf_generate_call(model: Any, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload, new_tokens: int) -> int:
    """The same batch through ``model.generate`` (K return sequences, the same sampling settings);
    returns the generated tokens (EOS is unreachable: every row runs to ``new_tokens``)."""
    import torch

    device = next(model.parameters()).device
    ids = torch.tensor(prompt_ids, dtype=torch.long, device=device)  # equal lengths: no padding
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                             temperature=w.temperature, top_p=w.top_p, top_k=w.top_k,
                             num_return_sequences=w.num_generations, max_new_tokens=new_tokens,
                             pad_token_id=tokenizer.pad_token_id)
    return int(out.shape[0] * (out.shape[1] - ids.shape[1]))


def fast_step(model: Any) -> dict[str, Any] | None:
    """The lean decoder's decision about its fast token step on this model (None: no check was needed
    or recorded, :func:`engine.sampling.fast_step_check.check_fast_step`)."""
    from engine.sampling.fast_step_check import fast_step_verdicts

    verdicts = fast_step_verdicts(model)
    return {where: dict(v) for where, v in verdicts.items()} or None


def decode_phase(model: Any, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload, device: str, *,
                 with_hf: bool = True) -> tuple[dict[str, Any], Any]:
    """The engine's sampler on the batch (a short warm-up call first, then the full call and a
    one-token call for the seconds per decode step) and, with ``with_hf``, ``generate`` on the same
    batch (its own warm-up call first). Returns the figures and the full call's generation."""
    import torch

    from engine.sampling.decoder import static_wanted

    new = w.max_new_tokens
    loops = token_loops(model, tokenizer, prompt_ids, w, device)  # warm-ups include the fast step's check, once
    default = "static" if static_wanted("auto", torch.device(device)) else "loop"
    chosen, gen = loops[default]
    full_s = chosen["s"]
    one_s, _ = timed(device, lambda: lean_call(model, tokenizer, prompt_ids, w, 1))
    static_s, loop_s = loops["static"][0]["s"], loops["loop"][0]["s"]
    out: dict[str, Any] = {
        "batch": len(prompt_ids) * w.num_generations, "new_tokens": new, "lean_path": default, "lean_s": full_s,
        "lean_tokens": gen.num_tokens, "lean_tokens_per_s": ratio(gen.num_tokens, full_s),
        "lean_one_token_s": one_s, "lean_step_s": per_decode_step_s(full_s, one_s, new),
        "lean_peak_mem_gib": chosen["peak_mem_gib"], "fast_step": fast_step(model),
        "static": loops["static"][0], "loop": loops["loop"][0], "static_vs_loop": ratio(loop_s, static_s),
        "same_tokens_static_loop": torch.equal(loops["static"][1].completion_ids, loops["loop"][1].completion_ids),
    }  # fmt: skip
    if with_hf:
        hf_generate_call(model, tokenizer, prompt_ids, w, min(2, new))  # warm-up
        hf_s, hf_tokens = timed(device, lambda: hf_generate_call(model, tokenizer, prompt_ids, w, new))
        same = hf_tokens == gen.num_tokens
        out.update(hf_generate_s=hf_s, hf_tokens=hf_tokens, hf_tokens_per_s=ratio(hf_tokens, hf_s),
                   rollout_vs_hf=ratio(hf_s, full_s) if same else None,
                   static_vs_hf=ratio(hf_s, static_s) if same else None,
                   loop_vs_hf=ratio(hf_s, loop_s) if same else None)
    return out, gen


def float32_decode(shape: str, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload, device: str) -> dict[str, Any]:
    """The engine's sampler on the same batch with a float32 model of ``shape`` (agent 0's seed), and
    the refresh of a bfloat16 sampling copy of its weights (``rollout_dtype``,
    :class:`engine.trainer.agents.RolloutCopy`) after every weight changed, as after an AdamW step."""
    import torch

    from bench.shapes import build_model
    from engine.trainer.agents import RolloutCopy

    model = build_model(shape, device, torch.float32, seed=w.seed, tokenizer=tokenizer)[0]
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    figures, _ = decode_phase(model, tokenizer, prompt_ids, w, device, with_hf=False)
    copy_ = RolloutCopy(model, torch.bfloat16)
    # the same call from a bfloat16 copy of these weights (rollout_dtype): the GPU check saw copies sample ~5x
    # faster than bfloat16 models built as such (docs/gpu.md, "Why bfloat16 decoded slower")
    sampler = copy_.refreshed()
    lean_call(sampler, tokenizer, prompt_ids, w, w.max_new_tokens)  # warm-up
    copy_s, copy_gen = timed(device, lambda: lean_call(sampler, tokenizer, prompt_ids, w, w.max_new_tokens))
    figures.update(bf16_copy_lean_s=copy_s, bf16_copy_tokens_per_s=ratio(copy_gen.num_tokens, copy_s))
    del copy_gen
    with torch.no_grad():
        for param in model.parameters():
            param.mul_(1.0)  # the same values, a new version: the copy must take every weight in again
    refresh_s, _ = timed(device, copy_.refreshed)
    del copy_, model
    figures["bf16_copy_refresh_s"] = refresh_s
    return figures


def attention_probe(device: str, heads: int = 14, kv_heads: int = 2, head_dim: int = 64, rows: int = 128,
                    lengths: range = range(129, 385, 8)) -> dict[str, Any]:
    """Seconds per call of one decode step's attention (one query per row against a growing strided
    cache, the fast step's call) per SDPA backend and dtype, over the key ``lengths`` of a record call,
    first pass (new shapes: plans built, kernels loaded) and second pass. On a CPU only the default
    backend is timed. Tells whether a backend pays per new key length (cuDNN builds a plan per shape)."""
    import torch
    from torch.nn.attention import SDPBackend

    backends: dict[str, Any] = {"default": None}
    if device.startswith("cuda"):
        backends.update(flash=SDPBackend.FLASH_ATTENTION, efficient=SDPBackend.EFFICIENT_ATTENTION,
                        cudnn=SDPBackend.CUDNN_ATTENTION, math=SDPBackend.MATH)
    out: dict[str, Any] = {"shape": {"rows": rows, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
                                     "lengths": [lengths.start, lengths.stop, lengths.step]}}
    for dtype in (torch.bfloat16, torch.float32):
        cache = torch.randn(rows, kv_heads, lengths.stop, head_dim, device=device, dtype=dtype)
        q = torch.randn(rows, heads, 1, head_dim, device=device, dtype=dtype)
        per: dict[str, Any] = {}
        for name, backend in backends.items():
            passes = []
            try:
                for _ in range(2):
                    seconds, _ = timed(device, functools.partial(_attention_pass, q, cache, lengths, backend))
                    passes.append(seconds / len(lengths))
                per[name] = {"first_pass_s": passes[0], "second_pass_s": passes[1]}
            except RuntimeError as exc:  # the backend refuses these inputs (dtype, GQA, strides)
                per[name] = {"error": str(exc).splitlines()[0][:160]}
        out[str(dtype).removeprefix("torch.")] = per
    return out


def _attention_pass(q: Any, cache: Any, lengths: range, backend: Any) -> None:
    """One decode step's attention at every key length (``backend`` None: SDPA's own choice)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    for n in lengths:
        keys = cache[:, :, :n]
        if backend is None:
            F.scaled_dot_product_attention(q, keys, keys, enable_gqa=True)
        else:
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, keys, keys, enable_gqa=True)
