"""One sampling call on the record's batch (``prompts x K`` rows, ``max_new_tokens`` each): the engine's
sampler (the lean decoder, as the trainer calls it) against Hugging Face ``generate``, the seconds
per decode step, and the same call in float32."""

from __future__ import annotations

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


def lean_call(model: Any, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload, new_tokens: int) -> Any:
    """The engine's sampling call (:func:`engine.sampling.sampler.generate_completions`), seeded."""
    import torch

    from engine.sampling.sampler import generate_completions

    device = next(model.parameters()).device
    return generate_completions(model, tokenizer, prompt_ids, num_generations=w.num_generations,
                                max_new_tokens=new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k,
                                generator=torch.Generator(device=device).manual_seed(w.seed))


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
    or recorded, :mod:`engine.sampling.fast_step_check`)."""
    from engine.sampling.fast_step_check import fast_step_verdicts

    verdicts = fast_step_verdicts(model)
    return {where: dict(v) for where, v in verdicts.items()} or None


def decode_phase(model: Any, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload, device: str, *,
                 with_hf: bool = True) -> tuple[dict[str, Any], Any]:
    """The engine's sampler on the batch (a short warm-up call first, then the full call and a
    one-token call for the seconds per decode step) and, with ``with_hf``, ``generate`` on the same
    batch (its own warm-up call first). Returns the figures and the full call's generation."""
    new = w.max_new_tokens
    lean_call(model, tokenizer, prompt_ids, w, min(2, new))  # warm-up (and the fast step's check, once)
    reset_peak_memory(device)
    full_s, gen = timed(device, lambda: lean_call(model, tokenizer, prompt_ids, w, new))
    peak, _ = peak_memory(device)
    one_s, _ = timed(device, lambda: lean_call(model, tokenizer, prompt_ids, w, 1))
    out: dict[str, Any] = {
        "batch": len(prompt_ids) * w.num_generations, "new_tokens": new, "lean_s": full_s,
        "lean_tokens": gen.num_tokens, "lean_tokens_per_s": ratio(gen.num_tokens, full_s),
        "lean_one_token_s": one_s, "lean_step_s": per_decode_step_s(full_s, one_s, new),
        "lean_peak_mem_gib": peak, "fast_step": fast_step(model),
    }  # fmt: skip
    if with_hf:
        hf_generate_call(model, tokenizer, prompt_ids, w, min(2, new))  # warm-up
        hf_s, hf_tokens = timed(device, lambda: hf_generate_call(model, tokenizer, prompt_ids, w, new))
        out.update(hf_generate_s=hf_s, hf_tokens=hf_tokens, hf_tokens_per_s=ratio(hf_tokens, hf_s),
                   rollout_vs_hf=ratio(hf_s, full_s) if hf_tokens == gen.num_tokens else None)
    return out, gen


def float32_decode(shape: str, tokenizer: Any, prompt_ids: list[list[int]], w: GpuWorkload, device: str) -> dict[str, Any]:
    """The engine's sampler on the same batch with a float32 model of ``shape`` (agent 0's seed), and
    the refresh of a bfloat16 sampling copy of its weights (``rollout_dtype``,
    :class:`engine.trainer.rollout_copy.RolloutCopy`) after every weight changed, as after an AdamW step."""
    import torch

    from bench.shapes import build_model
    from engine.trainer.rollout_copy import RolloutCopy

    model = build_model(shape, device, torch.float32, seed=w.seed, tokenizer=tokenizer)[0]
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    figures, _ = decode_phase(model, tokenizer, prompt_ids, w, device, with_hf=False)
    copy_ = RolloutCopy(model, torch.bfloat16)
    with torch.no_grad():
        for param in model.parameters():
            param.mul_(1.0)  # the same values, a new version: the copy must take every weight in again
    refresh_s, _ = timed(device, copy_.refreshed)
    del copy_, model
    figures["bf16_copy_refresh_s"] = refresh_s
    return figures
