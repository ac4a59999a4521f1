"""The lean decoder: a plain sampling loop over the model's forward and its KV cache.

Each prompt is encoded once and its KV cache repeated to its K (``num_generations``) sample rows
(:func:`_prefill`), and a long token prefix that several prompts share is encoded once (:mod:`engine.sampling.shared_prefix`);
every new token then goes through the model's forward, or for Llama-family models (Llama, Qwen2,
Qwen3, Mistral) through :class:`engine.sampling.fast_decode.FastDecoder` (identical logits). Temperature,
top-k and top-p follow ``transformers``' warpers exactly (:func:`filter_logits`), draws come from
``torch.multinomial`` on a private generator, and each sampled token's log-prob under the raw
policy is kept.
:func:`engine.sampling.sampler.generate_completions` is the entry point.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel

from engine.sampling.fast_decode import FastDecoder
from engine.sampling.fast_step_check import check_fast_step, needs_check
from engine.sampling.shared_prefix import PrefixLayout, plan_prefixes


def filter_logits(
    scores: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float = 1.0
) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus) on (N, V) float logits; removed entries get -inf.

    Ties follow ``transformers``' warpers: top-k keeps every logit equal to the k-th largest, top-p
    drops the smallest tokens whose cumulative probability stays <= 1 - top_p and always keeps the
    most likely one.
    """
    if temperature != 1.0:
        scores = scores / temperature
    if top_k:
        k = min(top_k, scores.shape[-1])
        kth = torch.topk(scores, k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative <= (1 - top_p)
        drop_sorted[..., -1:] = False
        drop = drop_sorted.scatter(1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores


@dataclass(frozen=True)
class Decoding:
    """What a decoder needs besides the model and the left-padded prompts (B = P * num_generations rows)."""

    num_generations: int
    max_new_tokens: int
    do_sample: bool
    temperature: float
    top_p: float
    top_k: int | None
    eos_ids: list[int]
    pad_id: int
    seed: int | None  # draws of this call only (the global RNG is left alone); None = unseeded
    fast_decode: bool = True  # the lean decoder's exact fast token step (Llama, Qwen2, Qwen3, Mistral)
    share_prompt: bool = True  # the lean decoder encodes each prompt once for its K samples
    share_prefix: bool = True  # ... and prompts' shared long prefixes once (engine.sampling.shared_prefix; with share_prompt)


def _forward_kwargs(model: PreTrainedModel) -> tuple[str, set[str]]:
    """The name the model's forward gives its KV cache, and which optional inputs it accepts."""
    params = inspect.signature(model.forward).parameters
    accepted = {name for name in ("position_ids", "logits_to_keep") if name in params}
    return ("cache" if "cache" in params else "past_key_values"), accepted


def forward_cache_argument(model: PreTrainedModel) -> tuple[str, bool] | None:
    """The keyword the model's forward takes its KV cache by (``cache`` or ``past_key_values``) and
    whether it accepts ``logits_to_keep``; None when it takes no cache (or no ``position_ids``,
    which a continued forward needs)."""
    params = inspect.signature(model.forward).parameters
    cache_key = next((name for name in ("cache", "past_key_values") if name in params), None)
    if cache_key is None or "position_ids" not in params:
        return None
    return cache_key, "logits_to_keep" in params


# models whose forward is ``lm_head(base_model(...).last_hidden_state[:, -keep:])`` and nothing else (checked in
# ``transformers`` 5.24's modeling files; Granite and Cohere scale the logits and Gemma2/3 softcap them, so they
# are not here) and whose cache holds only per-row keys and values (sliding-window layers included)
_HEAD_ON_HIDDEN = {
    "LlamaForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel", "MistralForCausalLM", "Qwen3ForCausalLM",
    "Phi3ForCausalLM", "GemmaForCausalLM", "Olmo2ForCausalLM",
}  # fmt: skip


def _cache_of(out: Any) -> Any:
    """The KV cache a forward returned (``cache`` or ``past_key_values``)."""
    return getattr(out, "cache", None) or getattr(out, "past_key_values", None)


def _prefix_layout(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, how: Decoding,
                   accepted: set[str]) -> PrefixLayout | None:
    """The shared-prefix layout of the prompts (:func:`engine.sampling.shared_prefix.plan_prefixes`), or None to
    encode every prompt in full: the switch is off (``share_prefix``, or ``share_prompt``, which it
    builds on), the model's logits are not its output layer on the final hidden states
    (``_HEAD_ON_HIDDEN``), its forward takes no ``position_ids``, or a sliding window could end
    within the prompt and completion (its cache would then drop keys of the shared prefix). Only
    float32 models on CPU, where the samples are verified to be those of the full prompts (log-probs
    within ~1e-6); in half precision, or with a GPU's kernels, the split attention rounds otherwise."""
    if not (how.share_prefix and how.share_prompt) or type(model).__name__ not in _HEAD_ON_HIDDEN:
        return None
    head = model.get_output_embeddings().weight
    if head.device.type != "cpu" or head.dtype != torch.float32:
        return None
    if "position_ids" not in accepted or "position_ids" not in _forward_kwargs(model.base_model)[1]:
        return None
    layout = plan_prefixes(ids, mask, how.pad_id)
    window = getattr(model.config, "sliding_window", None)
    if layout is not None and window is not None and layout.mask.shape[1] + how.max_new_tokens >= window:
        return None
    return layout


def _prefill_prefixes(model: PreTrainedModel, layout: PrefixLayout, mask: torch.Tensor | None, positions: torch.Tensor,
                      how: Decoding, keep: int | None) -> tuple[torch.Tensor, Any] | None:
    """Encode the G distinct prefixes, select their cache rows to the P prompts, encode the suffixes
    from there, and repeat to the P*K sample rows (like the shared prompt cache); returns the last
    position's float32 logits and the cache, or None (nothing encoded) when the prefix forward's
    cache cannot select and repeat rows."""
    base = model.base_model
    cache_key = _forward_kwargs(base)[0]
    prefix_mask = layout.prefix_mask
    out = base(input_ids=layout.prefix_ids, attention_mask=None if bool(prefix_mask.all()) else prefix_mask,
               position_ids=layout.prefix_positions(), use_cache=True)
    cache = _cache_of(out)
    if not (hasattr(cache, "batch_select_indices") and hasattr(cache, "batch_repeat_interleave")):
        return None
    cache.batch_select_indices(layout.rows)
    out = base(input_ids=layout.suffix_ids, attention_mask=mask, position_ids=positions[:, layout.prefix_width :],
               use_cache=True, **{cache_key: cache})
    cache = _cache_of(out)
    hidden = out.last_hidden_state if keep is None else out.last_hidden_state[:, -keep:]
    if how.num_generations > 1:
        cache.batch_repeat_interleave(how.num_generations)
        hidden = hidden.repeat_interleave(how.num_generations, dim=0)
    return model.get_output_embeddings()(hidden)[:, -1].to(dtype=torch.float32), cache


def _prefill(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor | None, positions: torch.Tensor,
             how: Decoding, cache_key: str, optional: dict[str, Any],
             layout: PrefixLayout | None = None) -> tuple[torch.Tensor, Any]:
    """Encode the (P, Lp) prompts; returns the last position's float32 logits and the KV cache, both
    for P*K rows (prompt-major).

    With ``share_prompt`` (Llama, Qwen2, Qwen3, Mistral, Phi3, Gemma, Olmo2 and GPT-2 models, sliding
    windows included: ``_HEAD_ON_HIDDEN``) the base model encodes each prompt once, the cache is
    repeated to the K sample rows (``Cache.batch_repeat_interleave``) and the output layer runs on
    the repeated final hidden states (all P*K rows, as the model's own forward would: a matrix
    product over 1 row and over 4 rows can round differently). The samples are those of encoding
    K copies: on SmolLM2-length prompts bit for bit; on very short prompts the P-row forward may
    take another CPU kernel and a log-prob can move by an ulp (tests: same tokens, log-probs within
    1e-5). Other models, and caches without ``batch_repeat_interleave``, encode every row.

    With a ``layout`` (:mod:`engine.sampling.shared_prefix`; ``ids``, ``mask`` and ``positions`` are then its
    full rows) shared prefixes are encoded once (:func:`_prefill_prefixes`); where the cache cannot
    select rows the layout's full rows are encoded as below.
    """
    extra = dict(optional)
    keep = extra.pop("logits_to_keep", None)
    if layout is not None:
        done = _prefill_prefixes(model, layout, mask, positions, how, keep)
        if done is not None:
            return done
    if how.num_generations > 1 and how.share_prompt and type(model).__name__ in _HEAD_ON_HIDDEN:
        base = model.base_model
        if "position_ids" in extra:
            extra["position_ids"] = positions
        out = base(input_ids=ids, attention_mask=mask, use_cache=True, **extra)
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        if hasattr(cache, "batch_repeat_interleave"):
            cache.batch_repeat_interleave(how.num_generations)
            hidden = out.last_hidden_state if keep is None else out.last_hidden_state[:, -keep:]
            logits = model.get_output_embeddings()(hidden.repeat_interleave(how.num_generations, dim=0))
            return logits[:, -1].to(dtype=torch.float32), cache

    def rows(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.repeat_interleave(how.num_generations, dim=0)

    if "position_ids" in extra:
        extra["position_ids"] = rows(positions)
    if keep is not None:
        extra["logits_to_keep"] = keep
    out = model(input_ids=rows(ids), attention_mask=rows(mask), use_cache=True, **extra, **{cache_key: None})
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    return out.logits[:, -1].to(dtype=torch.float32), cache


def decode_lean(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
                 how: Decoding) -> tuple[torch.Tensor, torch.Tensor]:
    device = ids.device
    num_generations, max_new_tokens, pad_id = how.num_generations, how.max_new_tokens, how.pad_id
    cache_key, accepted = _forward_kwargs(model)
    layout = _prefix_layout(model, ids, mask, how, accepted)
    if layout is not None:  # rows become [pads][prefix][pads][suffix]; the decode loop continues after them
        ids, mask = torch.cat([layout.prefix_ids[layout.rows], layout.suffix_ids], dim=1), layout.mask
    prompt_len = ids.shape[1]
    # the cache ends with the prompt and every sampled token but the last (which is never fed back)
    fast = how.fast_decode and max_new_tokens > 1 and FastDecoder.supports(model, prompt_len + max_new_tokens - 1)
    batch = ids.shape[0] * num_generations  # B = P*K rows, prompt-major
    positions = (mask.cumsum(dim=1) - 1).masked_fill(mask == 0, 0)
    # like generate: an all-ones mask is dropped (no padding), which lets attention use its causal fast path
    padded = not bool(mask.all())
    full_mask: torch.Tensor | None = None
    if padded:
        full_mask = torch.ones((batch, prompt_len + max_new_tokens), dtype=mask.dtype, device=device)
        full_mask[:, :prompt_len] = mask.repeat_interleave(num_generations, dim=0)
    rng = None
    if how.seed is not None and how.do_sample:
        rng = torch.Generator(device=device)
        rng.manual_seed(how.seed)
    eos = torch.as_tensor(how.eos_ids, device=device)
    optional: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    if "position_ids" in accepted:
        optional["position_ids"] = None

    logits, cache = _prefill(model, ids, mask if padded else None, positions, how, cache_key, optional, layout)
    stepper: FastDecoder | None = None
    check = False  # the first step runs both ways where the fast step's exactness is not known (a GPU)
    if fast and hasattr(cache, "layers"):  # the prompt went through the model, new tokens take the fast step
        stepper = FastDecoder(model, cache, batch, prompt_len + max_new_tokens)
        check = bool(needs_check(model))
        if not check:
            cache = None
    tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logprobs = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
    unfinished = torch.ones(batch, dtype=torch.bool, device=device)
    step_ids, step_pos = ids, positions.repeat_interleave(num_generations, dim=0)  # step_ids: set after step 0
    steps = 0
    for step in range(max_new_tokens):
        if step > 0:
            attn = None if full_mask is None else full_mask[:, : prompt_len + step]
            if stepper is not None and not check:
                logits = stepper.step(step_ids, step_pos, attn).to(dtype=torch.float32)
            else:
                fast_logits = stepper.step(step_ids, step_pos, attn) if stepper is not None else None
                if "position_ids" in optional:
                    optional["position_ids"] = step_pos
                out = model(input_ids=step_ids, attention_mask=attn, use_cache=True, **optional,
                            **{cache_key: cache})
                cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
                logits = out.logits[:, -1].to(dtype=torch.float32)
                if fast_logits is not None:  # both hold this step now: go on with the one the check keeps
                    check = False
                    if check_fast_step(model, fast_logits, out.logits[:, -1]):
                        cache = None
                    else:
                        stepper = None
        if how.do_sample:
            scores = filter_logits(logits, temperature=how.temperature, top_k=how.top_k, top_p=how.top_p)
            next_tokens = torch.multinomial(scores.softmax(dim=-1), num_samples=1, generator=rng).squeeze(1)
        else:
            next_tokens = torch.argmax(logits, dim=-1)
        chosen = torch.log_softmax(logits, dim=-1).gather(1, next_tokens[:, None]).squeeze(1)
        next_tokens = torch.where(unfinished, next_tokens, pad_id)
        tokens[:, step] = next_tokens
        logprobs[:, step] = torch.where(unfinished, chosen, 0.0)
        unfinished &= ~torch.isin(next_tokens, eos)
        steps = step + 1
        if not bool(unfinished.any()):
            break
        step_ids = next_tokens[:, None]
        step_pos = step_pos[:, -1:] + 1
    return tokens[:, :steps], logprobs[:, :steps]
