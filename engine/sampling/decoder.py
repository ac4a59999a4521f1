"""The decoder: the lean token loop the sampler calls, with its shared-prefix prompt layout and its
static-shape (CUDA-graph) variant.

Sections, top to bottom:

- **The lean loop** (:func:`decode_lean`): prefill once per prompt, then one token at a time through the
  model's forward or the fast step (:mod:`engine.sampling.fast_step`); ``transformers``' warpers
  reproduced (:func:`filter_logits`).
- **Shared prefixes** (:func:`plan_prefixes`): the layout that encodes a prefix several prompts share once.
- **Static-shape decoding** (:func:`decode_static`, :class:`StaticDecoder`): the same loop with fixed
  shapes, CUDA graphs and no host synchronisation per token.

:func:`engine.sampling.sampler.generate_completions` is the entry point.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import PreTrainedModel

from engine.sampling.fast_step import FastDecoder, _cache_layer, check_fast_step, fast_step_kept, needs_check

# == The lean loop =================================================================================
#
# The lean decoder: a plain sampling loop over the model's forward and its KV cache.
#
# Each prompt is encoded once and its KV cache repeated to its K (``num_generations``) sample rows
# (:func:`_prefill`), and a long token prefix that several prompts share is encoded once (the shared
# prefixes section below);
# every new token then goes through the model's forward, or for Llama-family models (Llama, Qwen2,
# Qwen3, Mistral) through :class:`engine.sampling.fast_step.FastDecoder` (identical logits). Temperature,
# top-k and top-p follow ``transformers``' warpers exactly (:func:`filter_logits`), draws come from
# ``torch.multinomial`` on a private generator, and each sampled token's log-prob under the raw
# policy is kept.

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
    """What a decoder needs besides the model, the left-padded prompts and the samples per prompt (K,
    the caller's ``num_generations``: B = P * K rows)."""

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
    share_prefix: bool = True  # ... and prompts' shared long prefixes once (plan_prefixes; with share_prompt)


def _forward_kwargs(model: Any) -> tuple[str, set[str]]:
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
    """The shared-prefix layout of the prompts (:func:`plan_prefixes`), or None to
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
                      num_generations: int, keep: int | None) -> tuple[torch.Tensor, Any] | None:
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
    if num_generations > 1:
        cache.batch_repeat_interleave(num_generations)
        hidden = hidden.repeat_interleave(num_generations, dim=0)
    return model.get_output_embeddings()(hidden)[:, -1].to(dtype=torch.float32), cache


def _prefill(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor | None, positions: torch.Tensor,
             num_generations: int, how: Decoding, cache_key: str, optional: dict[str, Any],
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

    With a ``layout`` (:func:`plan_prefixes`; ``ids``, ``mask`` and ``positions`` are then its
    full rows) shared prefixes are encoded once (:func:`_prefill_prefixes`); where the cache cannot
    select rows the layout's full rows are encoded as below.
    """
    extra = dict(optional)
    keep = extra.pop("logits_to_keep", None)
    if layout is not None:
        done = _prefill_prefixes(model, layout, mask, positions, num_generations, keep)
        if done is not None:
            return done
    if num_generations > 1 and how.share_prompt and type(model).__name__ in _HEAD_ON_HIDDEN:
        base = model.base_model
        if "position_ids" in extra:
            extra["position_ids"] = positions
        out = base(input_ids=ids, attention_mask=mask, use_cache=True, **extra)
        cache: Any = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        if hasattr(cache, "batch_repeat_interleave"):
            cache.batch_repeat_interleave(num_generations)
            hidden = out.last_hidden_state if keep is None else out.last_hidden_state[:, -keep:]
            logits = model.get_output_embeddings()(hidden.repeat_interleave(num_generations, dim=0))
            return logits[:, -1].to(dtype=torch.float32), cache

    def rows(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.repeat_interleave(num_generations, dim=0)

    if "position_ids" in extra:
        extra["position_ids"] = rows(positions)
    if keep is not None:
        extra["logits_to_keep"] = keep
    out = model(input_ids=rows(ids), attention_mask=rows(mask), use_cache=True, **extra, **{cache_key: None})
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    return out.logits[:, -1].to(dtype=torch.float32), cache


def decode_lean(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, num_generations: int,
                 how: Decoding) -> tuple[torch.Tensor, torch.Tensor]:
    device = ids.device
    max_new_tokens, pad_id = how.max_new_tokens, how.pad_id
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

    logits, cache = _prefill(model, ids, mask if padded else None, positions, num_generations, how, cache_key,
                             optional, layout)
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


# == Shared prefixes ===============================================================================
#
# Shared prompt prefixes encoded once: the layout the lean decoder uses when prompts share long prefixes.
#
# In a multi-turn rollout the next turn's prompts of a node's K children (and the agents' later turns
# generally) repeat the item's text and the earlier turns: long common token prefixes. When several
# of a call's P prompts share a prefix of at least :data:`MIN_SHARED_PREFIX` tokens, the lean decoder
# (:func:`_prefill`) encodes each distinct prefix once (G rows), selects the
# cache rows to the P prompts, and encodes only the suffixes, continuing from that cache. Each row
# is laid out as ``[pads][prefix][pads][suffix]`` over ``Wp + Ws`` columns: prefixes right-aligned
# in the first ``Wp`` columns (the prefix forward's left padding), suffixes right-aligned in the last
# ``Ws`` (so every row's last real token sits in the last column, where the decode loop continues).
# The attention mask is 0 on every pad and the position ids count real tokens only, so each real
# token sees exactly the keys and positions it has when its prompt is encoded in full.
#
# Prompts outside every group are single rows whose first tokens (at least one) go through the prefix
# forward and the rest (up to ``Ws``) through the suffix forward. :func:`plan_prefixes` returns None
# (encode every prompt in full) when no group reaches the threshold, a prompt has a single token, or
# the layout would encode no fewer cells than the full prompts or widen the rows by more than half.

MIN_SHARED_PREFIX = 32  # tokens a group of prompts must share for its prefix to be encoded once
MAX_WIDENING = 1.5  # the layout's width (Wp + Ws) at most this times the left-padded prompts' width


@dataclass(frozen=True)
class PrefixLayout:
    """The split prompts of one call: G prefix rows, P suffix rows, and the full (P, Wp + Ws) layout."""

    prefix_ids: torch.Tensor  # (G, Wp) left-padded prefixes
    prefix_mask: torch.Tensor  # (G, Wp)
    rows: torch.Tensor  # (P,) the prefix row of each prompt
    suffix_ids: torch.Tensor  # (P, Ws) left-padded suffixes (at least one token each)
    mask: torch.Tensor  # (P, Wp + Ws) 1 on real tokens: [pads][prefix][pads][suffix]
    positions: torch.Tensor  # (P, Wp + Ws) each real token's position in its prompt (0 on pads)

    @property
    def prefix_width(self) -> int:
        return int(self.prefix_ids.shape[1])

    def prefix_positions(self) -> torch.Tensor:
        """(G, Wp) position ids of the prefix forward (every prefix starts at position 0)."""
        return (self.prefix_mask.cumsum(dim=1) - 1).masked_fill(self.prefix_mask == 0, 0)


def _common(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _best_groups(seqs: list[list[int]], order: list[int], adjacent: list[int], lo: int, hi: int,
                 threshold: int) -> tuple[int, list[tuple[list[int], int]]]:
    """The grouping of the sorted run ``order[lo:hi]`` that saves the most encoded tokens.

    Returns (tokens saved, [(prompt indices, shared prefix length)]); a group's prefix is capped at
    its shortest prompt's length minus one (every prompt keeps a suffix token). Either the run is
    one group (if its prefix reaches ``threshold``) or it splits where adjacent prompts share least.
    """
    members = order[lo:hi]
    if hi - lo == 1:
        return 0, [(members, 0)]
    least = min(adjacent[lo : hi - 1])
    shared = min(least, min(len(seqs[i]) for i in members) - 1)
    whole = ((hi - lo - 1) * shared, [(members, shared)]) if shared >= threshold else (0, [])
    groups: list[tuple[list[int], int]] = []
    saved, start = 0, lo
    for cut in [j + 1 for j in range(lo, hi - 1) if adjacent[j] == least] + [hi]:
        part_saved, part_groups = _best_groups(seqs, order, adjacent, start, cut, threshold)
        saved, groups, start = saved + part_saved, groups + part_groups, cut
    return whole if whole[1] and whole[0] >= saved else (saved, groups)


def find_groups(seqs: list[list[int]], threshold: int = MIN_SHARED_PREFIX) -> list[tuple[list[int], int]]:
    """Groups of prompts (indices) with their shared prefix length (>= ``threshold``), singletons with 0."""
    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    adjacent = [_common(seqs[a], seqs[b]) for a, b in zip(order, order[1:], strict=False)]
    return _best_groups(seqs, order, adjacent, 0, len(order), threshold)[1]


def _splits(seqs: list[list[int]], groups: list[tuple[list[int], int]]) -> list[tuple[list[int], int]] | None:
    """(prompt indices, prefix length) per prefix row: groups as found, singletons split so their suffix
    fits the groups' widest suffix (their prefix keeps at least one token); None if a prompt is too short."""
    suffix_width = max((len(seqs[i]) - n for members, n in groups if len(members) > 1 for i in members), default=1)
    rows = []
    for members, n in groups:
        if len(members) == 1:
            length = len(seqs[members[0]])
            if length < 2:
                return None
            n = max(1, length - suffix_width)
        rows.append((members, n))
    return rows


def plan_prefixes(ids: torch.Tensor, mask: torch.Tensor, pad_id: int,
                  threshold: int = MIN_SHARED_PREFIX) -> PrefixLayout | None:
    """The prefix layout of left-padded (P, Lp) prompts, or None when it does not pay (see the module doc)."""
    seqs = [row[keep.bool()].tolist() for row, keep in zip(ids, mask, strict=True)]
    groups = find_groups(seqs, threshold)
    if not any(len(members) > 1 for members, _ in groups):
        return None
    splits = _splits(seqs, groups)
    if splits is None:
        return None
    wp = max(n for _, n in splits)
    ws = max(len(seqs[i]) - n for members, n in splits for i in members)
    width = int(ids.shape[1])
    if len(splits) * wp + len(seqs) * ws >= len(seqs) * width or wp + ws > MAX_WIDENING * width:
        return None
    return _layout(seqs, splits, wp, ws, pad_id, ids.device)


def _layout(seqs: list[list[int]], splits: list[tuple[list[int], int]], wp: int, ws: int, pad_id: int,
            device: torch.device) -> PrefixLayout:
    """Fill the layout's tensors (pads carry ``pad_id``; their values never reach a real token)."""
    count = len(seqs)
    prefix_ids = torch.full((len(splits), wp), pad_id, dtype=torch.long)
    prefix_mask = torch.zeros((len(splits), wp), dtype=torch.long)
    rows = torch.zeros(count, dtype=torch.long)
    suffix_ids = torch.full((count, ws), pad_id, dtype=torch.long)
    mask = torch.zeros((count, wp + ws), dtype=torch.long)
    for group, (members, n) in enumerate(splits):
        prefix = seqs[members[0]][:n]
        prefix_ids[group, wp - n :] = torch.as_tensor(prefix, dtype=torch.long)
        prefix_mask[group, wp - n :] = 1
        for i in members:
            suffix = seqs[i][n:]
            rows[i] = group
            suffix_ids[i, ws - len(suffix) :] = torch.as_tensor(suffix, dtype=torch.long)
            mask[i, wp - n : wp] = 1
            mask[i, wp + ws - len(suffix) :] = 1
    positions = (mask.cumsum(dim=1) - 1).masked_fill(mask == 0, 0)
    return PrefixLayout(prefix_ids.to(device), prefix_mask.to(device), rows.to(device), suffix_ids.to(device),
                        mask.to(device), positions.to(device))


# == Static-shape decoding =========================================================================
#
# Static-shape decoding: the lean decoder's token loop with fixed tensor shapes, CUDA graphs and no
# host synchronisation per token.
#
# On a GPU a one-token decode step of a small model is bound by kernel launches (a few hundred per
# token) and by the host waiting for the device, not by arithmetic. This path removes both:
#
# - **Static KV cache.** :class:`StaticDecoder` holds keys and values for ``rows`` x ``max_len``
#   positions, a boolean attention mask over them and the step's inputs (token ids, positions, the
#   column written) in fixed buffers. A step writes its keys and values at the column held in a
#   device tensor (``index_copy_``) and attends over the first ``L`` columns, ``L`` the written length
#   rounded up to ``key_block`` (the unwritten tail is masked out): every step of a block has the same
#   shapes and buffer addresses.
# - **CUDA graphs.** On CUDA each (row bucket, ``L``) step is captured once in a ``torch.cuda.CUDAGraph``
#   and replayed (one launch per token instead of hundreds). The graphs, the cache and the buffers
#   are kept per model and reused by the next call with the same row bucket (rows rounded up to a power
#   of two; the spare rows compute on a dummy key and are never sampled), while the model's weights
#   are the same tensors (the optimizer updates them in place; a replaced tensor rebuilds).
#   Elsewhere (the CPU, and worker threads: agents sampling concurrently under ``parallel_training:
#   mp``, where another agent's kernels would meet a capture in progress) the same step runs eagerly.
# - **Sampling on the device.** Temperature/top-k/top-p filtering, the draw, the log-prob and the EOS
#   bookkeeping are tensor operations; the loop asks the host whether every row has finished only
#   every :data:`CHECK_EVERY` tokens (the steps run past the last EOS draw from this call's private
#   generator and are cut off, so the returned tokens and log-probs are those of the lean loop).
#
# Exactness. The draws are the lean decoder's: same prefill, same logits per step, same order of
# random numbers, so on the CPU the tokens equal the lean decoder's for the same seed. With
# ``key_block`` 1 (the CPU default) the step attends over exactly the written keys, as the fast step
# does, and its logits are bit-identical to it (tests: ``torch.equal``); with a larger block the
# masked tail changes SDPA's reduction lengths (see docs/gpu.md for what the tests measured). On a
# GPU the step is checked once per model, device and dtype against the model's forward like the fast
# step (:mod:`engine.sampling.fast_step`, kind ``static``); a refused check decodes that call and the
# model's later calls with the lean decoder.
#
# Rows are not refilled: one call's P x K rows decode together until all have finished (a finished
# row keeps computing on pad tokens, as in the lean loop), so the sampled tokens stay those of the
# lean decoder. Refilling freed rows with further prompts would change which random numbers each row
# draws; it is not done.

log = logging.getLogger(__name__)

DecodeGraphs = Literal["auto", "on", "off"]
CHECK_EVERY = 16  # tokens between the host's checks that every row has finished
CUDA_KEY_BLOCK = 64  # keys attended in blocks of this many positions on CUDA (one graph per block)
# the decode step's attention kernels on CUDA: cuDNN's SDPA builds an execution plan per shape (a new key
# length is a new plan), which a one-token step with a growing cache pays again and again; it is left out
DECODE_SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def static_wanted(setting: str, device: torch.device) -> bool:
    """Whether ``decode_graphs`` (auto / on / off) asks for the static path on ``device``: auto is on
    for CUDA only (on the CPU the lean decoder's loop is as fast and needs no buffers)."""
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"decode_graphs must be auto, on or off, got {setting!r}")
    return setting == "on" or (setting == "auto" and device.type == "cuda")


def row_bucket(rows: int, device: torch.device) -> int:
    """Rows of the static buffers for ``rows`` sampled rows: the next power of two on CUDA (graphs
    are reused across calls of that bucket); exactly ``rows`` elsewhere (a spare row would change
    the CPU's matrix-product kernels, hence rounding)."""
    if device.type != "cuda":
        return rows
    return 1 << max(0, (rows - 1).bit_length())


def default_key_block(device: torch.device) -> int:
    return CUDA_KEY_BLOCK if device.type == "cuda" else 1


def _round_up(n: int, block: int) -> int:
    return -(-n // block) * block


def _weight_signature(model: Any) -> tuple[tuple[int, int], ...]:
    """The data pointers and versions' identities of the model's floating tensors: graphs read the
    weights by address, so a replaced tensor means rebuilding them."""
    return tuple((t.data_ptr(), t.numel()) for t in model.parameters())


@dataclass
class DecodeStats:
    """The last static decode call of a model: steps run, wall seconds of its token loop (the host
    waits for the device once at the end), graphs captured in that call."""

    steps: int
    seconds: float
    graphs_captured: int
    rows: int
    bucket: int

    @property
    def step_s(self) -> float:
        return self.seconds / max(1, self.steps)


_stats: weakref.WeakKeyDictionary[Any, DecodeStats] = weakref.WeakKeyDictionary()
_kept: weakref.WeakKeyDictionary[Any, StaticDecoder] = weakref.WeakKeyDictionary()


def last_decode_stats(model: Any) -> DecodeStats | None:
    """The per-step timing of ``model``'s last static decode call (None before one)."""
    return _stats.get(model)


def release(model: Any) -> None:
    """Drop the static cache and graphs kept for ``model`` (they hold rows x max_len keys and values)."""
    _kept.pop(model, None)


class StaticDecoder(FastDecoder):
    """The fast step's layer stack over fixed buffers (see the module doc)."""

    def __init__(self, model: Any, rows: int, max_len: int, key_block: int, graphs: bool) -> None:
        self._read_weights(model)
        kv_heads = model.config.num_key_value_heads
        device, dtype = self.embed.device, self.embed.dtype
        shape = (rows, kv_heads, max_len, self.head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(self.num_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(self.num_layers)]
        self.rows, self.max_len, self.key_block = rows, max_len, key_block
        self.mask = torch.zeros((rows, max_len), dtype=torch.bool, device=device)
        self.ids = torch.zeros((rows, 1), dtype=torch.long, device=device)
        self.pos = torch.zeros((rows, 1), dtype=torch.long, device=device)
        self.col = torch.zeros(1, dtype=torch.long, device=device)
        self.graphs = _graphs_here(graphs, device)
        self.captured: dict[int, tuple[Any, torch.Tensor]] = {}
        self.pool: Any = None
        self.signature = _weight_signature(model)
        self.unmasked = False  # no padding and key_block 1: attend without a mask, as the fast step does
        self.length = 0
        self.new_graphs = 0

    def fits(self, model: Any, rows: int, max_len: int, key_block: int, graphs: bool) -> bool:
        return (self.rows == rows and self.max_len >= max_len and self.key_block == key_block
                and self.graphs == _graphs_here(graphs, self.embed.device)
                and self.signature == _weight_signature(model))

    def load(self, prompt_cache: Any, batch: int, prompt_mask: torch.Tensor | None,
             last_positions: torch.Tensor) -> None:
        """Copy the prompt's keys and values (``batch`` rows, prompt-major) into the buffers; spare
        rows attend to their first (zero) key only. ``prompt_mask`` (batch, Lp) or None (no padding);
        ``last_positions`` (batch, 1) the prompt's last position ids."""
        length = int(_cache_layer(prompt_cache, 0)[0].shape[2])
        for index in range(self.num_layers):
            k, v = _cache_layer(prompt_cache, index)
            self.keys[index][:batch, :, :length] = k
            self.values[index][:batch, :, :length] = v
        self.mask.zero_()
        self.mask[:batch, :length] = True if prompt_mask is None else prompt_mask.bool()
        self.mask[batch:, 0] = True
        self.pos.zero_()
        self.pos[:batch] = last_positions
        self.ids.zero_()
        self.length = length
        self.unmasked = prompt_mask is None and self.key_block == 1
        self.new_graphs = 0

    def _step_static(self, width: int) -> torch.Tensor:
        """One step over the buffers attending to the first ``width`` columns; no host values but
        ``width`` enter it (graph-capturable). On CUDA, SDPA may pick Flash, memory-efficient or math
        kernels, not cuDNN's (see :data:`DECODE_SDPA_BACKENDS`)."""
        if self.embed.device.type == "cuda":
            with sdpa_kernel(DECODE_SDPA_BACKENDS):
                return self._step_body(width)
        return self._step_body(width)

    def _step_body(self, width: int) -> torch.Tensor:
        self.mask.index_fill_(1, self.col, True)
        attn_mask = None if self.unmasked else self.mask[:, None, None, :width]

        def store(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.keys[index].index_copy_(2, self.col, k)
            self.values[index].index_copy_(2, self.col, v)
            return self.keys[index][:, :, :width], self.values[index][:, :, :width]

        return self._run(self.ids, self.pos, attn_mask, store)

    def _replay(self, width: int) -> torch.Tensor:
        entry = self.captured.get(width)
        if entry is None:
            try:
                entry = self._capture(width)
            except Exception as exc:  # noqa: BLE001 - any capture failure: run this decoder eagerly from now on
                log.warning("CUDA graph capture of the static decode step failed (%s: %s); the step runs eagerly",
                            type(exc).__name__, exc)
                self.graphs = False
                self.captured.clear()
                return self._step_static(width)
        entry[0].replay()
        return entry[1]

    def _capture(self, width: int) -> tuple[Any, torch.Tensor]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture (it writes what the replay rewrites)
            self._step_static(width)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            out = self._step_static(width)
        self.pool = graph.pool()
        self.captured[width] = (graph, out)
        self.new_graphs += 1
        return graph, out

    def step_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per sampled row ((batch,) ids on the device) and return the (batch, V)
        logits of the next position (a view of a buffer the next step overwrites)."""
        batch = tokens.shape[0]
        t = self.length
        self.ids[:batch, 0].copy_(tokens)
        self.pos.add_(1)
        self.col.fill_(t)
        width = min(self.max_len, _round_up(t + 1, self.key_block))
        logits = self._replay(width) if self.graphs else self._step_static(width)
        self.length = t + 1
        return logits[:batch]


def _graphs_here(graphs: bool, device: torch.device) -> bool:
    """CUDA graphs are captured on CUDA from the main thread only: agents sampling in worker threads
    (``parallel_training: mp``) may share the device with another agent's kernels, which a capture
    in progress would refuse; there the static step runs eagerly."""
    return graphs and device.type == "cuda" and threading.current_thread() is threading.main_thread()


def _decoder_for(model: Any, rows: int, max_len: int, key_block: int, graphs: bool) -> StaticDecoder:
    """A decoder with these buffers: the one kept for ``model`` when it fits (CUDA graphs), else new."""
    kept = _kept.get(model)
    if kept is not None and kept.fits(model, rows, max_len, key_block, graphs):
        return kept
    _kept.pop(model, None)  # free the old buffers first
    decoder = StaticDecoder(model, rows, max_len, key_block, graphs)
    if decoder.graphs:
        _kept[model] = decoder
    return decoder


def decode_static(model: Any, ids: torch.Tensor, mask: torch.Tensor, num_generations: int, how: Decoding, *,
                  key_block: int | None = None, check_every: int = CHECK_EVERY,
                  graphs: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The lean decoder's sampling call (:func:`decode_lean`, same arguments
    and results) through :class:`StaticDecoder`; models the fast step does not support, and models
    whose static step failed its check on this device, go through the lean decoder."""
    _stats.pop(model, None)  # set again only by a call that goes through the static path
    device = ids.device
    block = key_block or default_key_block(device)
    k, new = num_generations, how.max_new_tokens
    if check_every < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    if new < 2 or (needs_check(model, "static") is False and not fast_step_kept(model, "static")):
        return decode_lean(model, ids, mask, k, how)
    cache_key, accepted = _forward_kwargs(model)
    layout = _prefix_layout(model, ids, mask, how, accepted)
    full_ids, full_mask = ids, mask
    if layout is not None:
        full_ids, full_mask = torch.cat([layout.prefix_ids[layout.rows], layout.suffix_ids], dim=1), layout.mask
    prompt_len = full_ids.shape[1]
    max_len = _round_up(prompt_len + new - 1, block)
    if not FastDecoder.supports(model, max_len) or "position_ids" not in accepted:
        return decode_lean(model, ids, mask, k, how)
    batch = full_ids.shape[0] * k
    positions = (full_mask.cumsum(dim=1) - 1).masked_fill(full_mask == 0, 0)
    padded = not bool(full_mask.all())
    optional: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    optional["position_ids"] = None
    logits, cache = _prefill(model, full_ids, full_mask if padded else None, positions, k, how, cache_key,
                             optional, layout)
    if not hasattr(cache, "layers"):
        return decode_lean(model, ids, mask, k, how)
    stepper = _decoder_for(model, row_bucket(batch, device), max_len, block, graphs)
    last = positions[:, -1:].repeat_interleave(k, dim=0)
    stepper.load(cache, batch, full_mask.repeat_interleave(k, dim=0) if padded else None, last)
    check = bool(needs_check(model, "static"))
    if not check:
        cache = None
    rng = None
    if how.seed is not None and how.do_sample:
        rng = torch.Generator(device=device)
        rng.manual_seed(how.seed)
    eos = torch.as_tensor(how.eos_ids, device=device)
    tokens = torch.full((batch, new), how.pad_id, dtype=torch.long, device=device)
    logprobs = torch.zeros((batch, new), dtype=torch.float32, device=device)
    unfinished = torch.ones(batch, dtype=torch.bool, device=device)
    ran = torch.zeros((), dtype=torch.long, device=device)  # steps the lean loop would have run
    next_tokens = tokens[:, 0]
    started = time.perf_counter()
    for step in range(new):
        if step > 0:
            logits = stepper.step_tokens(next_tokens).to(dtype=torch.float32)
            if check:  # the first step on a device where the static step is not known exact
                check = False
                attn = None
                if padded:
                    attn = torch.ones((batch, prompt_len + step), dtype=full_mask.dtype, device=device)
                    attn[:, :prompt_len] = full_mask.repeat_interleave(k, dim=0)
                optional["position_ids"] = last + step
                out = model(input_ids=next_tokens[:, None], attention_mask=attn, use_cache=True, **optional,
                            **{cache_key: cache})
                cache = None
                if not check_fast_step(model, logits, out.logits[:, -1], kind="static"):
                    release(model)
                    return decode_lean(model, ids, mask, k, how)
        if how.do_sample:
            scores = filter_logits(logits, temperature=how.temperature, top_k=how.top_k, top_p=how.top_p)
            drawn = torch.multinomial(scores.softmax(dim=-1), num_samples=1, generator=rng).squeeze(1)
        else:
            drawn = torch.argmax(logits, dim=-1)
        chosen = torch.log_softmax(logits, dim=-1).gather(1, drawn[:, None]).squeeze(1)
        ran += unfinished.any()
        next_tokens = torch.where(unfinished, drawn, how.pad_id)
        tokens[:, step] = next_tokens
        logprobs[:, step] = torch.where(unfinished, chosen, 0.0)
        unfinished &= ~torch.isin(next_tokens, eos)
        if (step + 1) % check_every == 0 and not bool(unfinished.any()):
            break
    steps = int(ran)  # the one wait for the device
    _stats[model] = DecodeStats(steps=steps, seconds=time.perf_counter() - started,
                                graphs_captured=stepper.new_graphs, rows=batch, bucket=stepper.rows)
    return tokens[:, :steps], logprobs[:, :steps]
