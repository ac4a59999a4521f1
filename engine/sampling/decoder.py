"""The decoder: the lean token loop the sampler calls, with its shared-prefix prompt layout and its
fast token step for Llama-family models.

Sections, top to bottom:

- **The lean loop** (:func:`decode_lean`): prefill once per prompt, then one token at a time through the
  model's forward or the fast step (below); ``transformers``' warpers reproduced (:func:`filter_logits`).
- **Shared prefixes** (:func:`plan_prefixes`): the layout that encodes a prefix several prompts share once.
- **The fast step** (:class:`FastDecoder`): one decode step of a Llama-family model without its module
  stack: the model's weights read once, the same tensor operations as ``transformers``' SDPA path, a
  KV cache allocated once per completion.
- **The check** (:func:`needs_check`, :func:`fast_step_kept`): on devices other than the CPU, the
  fast step (and the static-shape step of :mod:`engine.sampling.static_decode`) compared once per
  model, device and dtype with the model's forward (:mod:`engine.sampling.fast_step_check`).
- **Which loop** (:func:`static_wanted`): ``decode_graphs`` picks the static-shape variant of the loop
  (:mod:`engine.sampling.static_decode`: fixed shapes, CUDA graphs, no host synchronisation per token).

:func:`engine.sampling.sampler.generate_completions` is the entry point.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from engine.sampling.fast_step_check import check_fast_step, recorded_verdict
from engine.sampling.fast_step_check import (
    fast_step_verdicts as fast_step_verdicts,  # re-exported: its old home
)

# == The lean loop =================================================================================
#
# The lean decoder: a plain sampling loop over the model's forward and its KV cache.
#
# Each prompt is encoded once and its KV cache repeated to its K (``num_generations``) sample rows
# (:func:`_prefill`), and a long token prefix that several prompts share is encoded once (the shared
# prefixes section below);
# every new token then goes through the model's forward, or for Llama-family models (Llama, Qwen2,
# Qwen3, Mistral) through :class:`FastDecoder` (the fast step below) (identical logits). Temperature,
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
    """The prefix layout of left-padded (P, Lp) prompts, or None when it does not pay (see the section's comment)."""
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


# == The fast step =================================================================================
#
# A one-token decode step for Llama-family models (Llama, Qwen2, Qwen3, Mistral, SmolLM2) without the
# module stack.
#
# On small models a decode step is dominated by Python: every token walks ~30 ``nn.Module`` calls per
# layer, rebuilds the causal mask and position embeddings, and grows a ``DynamicCache`` by
# concatenation. ``FastDecoder`` reads the model's own weights and runs the same tensor operations
# in the same order as ``transformers``' SDPA code path (RMSNorm in float32, rotary embedding from
# the model's ``inv_freq``, Qwen3's RMSNorm of each query and key head before it, grouped-query
# attention through ``scaled_dot_product_attention``, the gated MLP), writing keys and values into a
# cache allocated once for the whole completion. The prompt itself is encoded by the model's regular
# forward (one call), so only the per-token loop is replaced. The logits are bit-identical to the
# model's forward: tests compare them with ``torch.equal`` (and the sampled tokens with
# ``generate``), so a ``transformers`` upgrade that changes the reference computation fails loudly
# instead of drifting.
#
# ``FastDecoder.supports(model, positions)`` is False for anything this path does not reproduce (other
# architectures, attention other than SDPA, scaled RoPE variants, sliding windows, tensor-parallel
# splits, quantised projections or adapters other than one plain LoRA adapter, hooks, training mode);
# callers then use the model's forward. On devices other than the CPU (a GPU, where SDPA may pick
# other kernels for a strided cache) the step is not known to be exact: the lean decoder checks it
# against the forward once per model, device and dtype and keeps it within a stated tolerance
# (the check, below); a model whose check failed is not supported there. A Mistral model's window (``sliding_window``, 4096 by default) applies to every
# layer: the step is exact while the keys and values attended (prompt, padding included, plus the
# tokens stepped) stay shorter than the window, where its window mask equals the full causal one and
# ``transformers`` skips it as it does for full attention; from a key/value length equal to the
# window it builds an explicit mask, which SDPA rounds differently (seen: one ulp), so longer
# completions use the model's forward.

_SUPPORTED = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"}
_LAYERS = {"LlamaDecoderLayer", "Qwen2DecoderLayer", "Qwen3DecoderLayer", "MistralDecoderLayer"}
_WINDOW_ON_EVERY_LAYER = {"MistralForCausalLM"}  # its attention takes ``config.sliding_window`` as is


@dataclass
class _Layer:
    """One decoder layer's weights: norms as (weight, eps), projections as :class:`_Proj`."""

    norm1: tuple[torch.Tensor, float]
    norm2: tuple[torch.Tensor, float]
    q: _Proj
    k: _Proj
    v: _Proj
    o: _Proj
    gate: _Proj
    up: _Proj
    down: _Proj
    act: Any
    q_norm: tuple[torch.Tensor, float] | None = None  # Qwen3: RMSNorm over each head's dims, before rotary
    k_norm: tuple[torch.Tensor, float] | None = None


@dataclass
class _Proj:
    """A projection as the model computes it: ``F.linear`` with the weight and bias, plus, for a peft
    LoRA layer, its adapter's ``B(A(x)) * scaling`` added the way peft adds it (same ops, same order)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    lora: tuple[torch.Tensor, torch.Tensor, float] | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight, self.bias)
        if self.lora is None:
            return out
        a, b, scaling = self.lora
        xa = x if x.dtype == a.dtype else x.to(a.dtype)
        return (out + F.linear(F.linear(xa, a), b) * scaling).to(out.dtype)


def _plain_linear(module: Any) -> bool:
    return type(module) is torch.nn.Linear and module.weight.is_floating_point() and not module._forward_hooks


def _lora_adapter(module: Any) -> tuple[torch.Tensor, torch.Tensor, float] | None:
    """(A, B, scaling) of a peft LoRA linear with one plain adapter active (no DoRA or other variant,
    not merged, no bias on B, dropout off in eval); None for anything else."""
    base = getattr(module, "base_layer", None)
    if base is None or not hasattr(module, "lora_A") or module._forward_hooks or not _plain_linear(base):
        return None
    active = list(getattr(module, "active_adapters", []))
    if len(active) != 1 or module.merged or module.disable_adapters or active[0] not in module.lora_A:
        return None
    name = active[0]
    a, b = module.lora_A[name], module.lora_B[name]
    if name in getattr(module, "lora_variant", {}) or not (_plain_linear(a) and _plain_linear(b)) or b.bias is not None:
        return None
    if not isinstance(module.lora_dropout[name], torch.nn.Identity | torch.nn.Dropout):
        return None
    return a.weight, b.weight, float(module.scaling[name])


def _attention_supported(model: Any, positions: int | None) -> bool:
    """SDPA, default RoPE, no tensor-parallel split, full attention on every layer, and for Mistral no
    window or one longer than ``positions`` (see the section's comment)."""
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or {}
    if getattr(cfg, "_attn_implementation", None) != "sdpa" or rope.get("rope_type", "default") != "default":
        return False
    if getattr(cfg, "pretraining_tp", 1) != 1 or getattr(cfg, "use_sliding_window", False):
        return False
    if any(t != "full_attention" for t in (getattr(cfg, "layer_types", None) or [])):
        return False
    window = getattr(cfg, "sliding_window", None) if type(model).__name__ in _WINDOW_ON_EVERY_LAYER else None
    return window is None or (positions is not None and positions < window)


def _plain_head_norms(attention: Any) -> bool:
    """No per-head norms (Llama, Qwen2, Mistral), or Qwen3's plain RMSNorms over the head dims."""
    norms: list[Any] = [getattr(attention, name, None) for name in ("q_norm", "k_norm")]
    if all(norm is None for norm in norms):
        return True
    return all(type(norm).__name__ == "Qwen3RMSNorm" and not norm._forward_hooks and not norm._forward_pre_hooks
               and norm.weight.shape == (attention.head_dim,) for norm in norms)


def _norm(module: Any) -> tuple[torch.Tensor, float] | None:
    return None if module is None else (module.weight, module.variance_epsilon)


def _linear(module: Any) -> _Proj:
    lora = _lora_adapter(module)
    base = module.base_layer if lora is not None else module
    return _Proj(base.weight, base.bias, lora)


def _rms(x: torch.Tensor, norm: tuple[torch.Tensor, float]) -> torch.Tensor:
    """RMSNorm as ``transformers`` computes it (statistics in float32, scaled in the input dtype)."""
    weight, eps = norm
    if x.dtype == torch.float32:
        return weight * (x * x.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_())
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _head_norm(x: torch.Tensor, norm: tuple[torch.Tensor, float] | None) -> torch.Tensor:
    """Qwen3's RMSNorm over each head's dims (the model's (B, 1, H, D) view of the projection and this
    (B, H, 1, D) one are the same memory, so each head is reduced alike); identity without one."""
    return x if norm is None else _rms(x, norm)


def _rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` in fewer ops: ``rotate_half(x) * sin`` equals
    ``roll(x, half) * [-sin_lo, sin_hi]`` exactly (a sign flip commutes with rounding)."""
    return (x * cos).add_(torch.roll(x, x.shape[-1] // 2, dims=-1).mul_(signed_sin))


class FastDecoder:
    """Runs one-token decode steps of a supported model against a pre-allocated KV cache.

    Build it after the prompt's forward: ``FastDecoder(model, cache, batch, max_len)`` copies the
    prompt's keys/values (from the returned ``DynamicCache``) into buffers of ``max_len`` positions;
    each :meth:`step` appends one token per row and returns (B, V) logits. (The lean decoder
    encodes each prompt once and repeats its cache to the K sample rows before handing it over.)
    """

    @staticmethod
    def supports(model: Any, positions: int | None = None) -> bool:
        """True when :meth:`step` reproduces ``model``'s forward (see the section's comment) while the cache
        holds at most ``positions`` keys (the prompt's, padding included, plus one per step; the
        lean decoder steps every sampled token but the last); None claims only models whose attention
        is full at every length."""
        if type(model).__name__ not in _SUPPORTED or model.training:
            return False
        if not fast_step_kept(model) and needs_check(model) is False:  # checked on this device and refused
            return False
        if not _attention_supported(model, positions):
            return False
        inner = model.model
        if inner.rotary_emb.attention_scaling != 1.0 or model._forward_hooks or model._forward_pre_hooks:
            return False
        if not {type(layer).__name__ for layer in inner.layers} <= _LAYERS:
            return False
        if any(layer._forward_hooks or layer._forward_pre_hooks for layer in inner.layers):
            return False
        if not all(_plain_head_norms(layer.self_attn) for layer in inner.layers):
            return False
        linears = [model.lm_head] + [
            proj for layer in inner.layers
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                         layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)
        ]  # fmt: skip
        # plain float nn.Linear, or one with a plain LoRA adapter: quantised or other adapter-wrapped
        # projections compute something else
        return all(_plain_linear(m) or _lora_adapter(m) is not None for m in linears)

    def __init__(self, model: Any, prompt_cache: Any, batch: int, max_len: int) -> None:
        self._read_weights(model)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        for index in range(self.num_layers):
            k, v = _cache_layer(prompt_cache, index)
            shape = (batch, k.shape[1], max_len, k.shape[3])
            kb, vb = k.new_empty(shape), v.new_empty(shape)
            kb[:, :, : k.shape[2]] = k
            vb[:, :, : v.shape[2]] = v
            self.keys.append(kb)
            self.values.append(vb)
        self.length = int(_cache_layer(prompt_cache, 0)[0].shape[2])

    def _read_weights(self, model: Any) -> None:
        """The model's weights as the step reads them (no copies: the parameters themselves)."""
        inner = model.model
        cfg = model.config
        self.embed = inner.embed_tokens.weight
        self.final_norm = (inner.norm.weight, inner.norm.variance_epsilon)
        self.lm_head = _linear(model.lm_head)
        self.inv_freq = inner.rotary_emb.inv_freq.to(torch.float)
        attn0 = inner.layers[0].self_attn
        self.head_dim = attn0.head_dim
        self.scaling = attn0.scaling
        self.groups = attn0.num_key_value_groups
        self.num_layers = cfg.num_hidden_layers
        self.layers = [
            _Layer(
                norm1=(layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon),
                norm2=(layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon),
                q=_linear(layer.self_attn.q_proj), k=_linear(layer.self_attn.k_proj),
                v=_linear(layer.self_attn.v_proj), o=_linear(layer.self_attn.o_proj),
                gate=_linear(layer.mlp.gate_proj), up=_linear(layer.mlp.up_proj),
                down=_linear(layer.mlp.down_proj), act=layer.mlp.act_fn,
                q_norm=_norm(getattr(layer.self_attn, "q_norm", None)),
                k_norm=_norm(getattr(layer.self_attn, "k_norm", None)),
            )
            for layer in inner.layers[: self.num_layers]
        ]  # fmt: skip

    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Logits (B, V) for one new token per row. ``ids`` and ``positions`` are (B, 1); ``mask`` is
        None (no padding anywhere) or the (B, L+1) 0/1 attention mask over the cache and the new token.
        """
        t = self.length
        attn_mask = None if mask is None else mask[:, None, None, : t + 1].bool()

        def store(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.keys[index][:, :, t : t + 1] = k
            self.values[index][:, :, t : t + 1] = v
            return self.keys[index][:, :, : t + 1], self.values[index][:, :, : t + 1]

        logits = self._run(ids, positions, attn_mask, store)
        self.length = t + 1
        return logits

    def _run(self, ids: torch.Tensor, positions: torch.Tensor, attn_mask: torch.Tensor | None,
             store: Any) -> torch.Tensor:
        """The layer stack for one token per row: ``store(layer, k, v)`` writes the token's keys and
        values into the cache and returns the keys and values to attend to; ``attn_mask`` is None or
        a (B, 1, 1, keys) boolean mask. Returns the (B, V) logits."""
        batch = ids.shape[0]
        h = F.embedding(ids, self.embed)
        freqs = positions[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().to(h.dtype).unsqueeze(1)  # (B, 1, 1, D)
        sin = emb.sin().to(h.dtype)
        half = sin.shape[-1] // 2
        signed_sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).unsqueeze(1)
        shape = (batch, -1, 1, self.head_dim)  # one token: (B, 1, H*D) is (B, H, 1, D) in memory
        for index, layer in enumerate(self.layers):
            x = _rms(h, layer.norm1)
            q = _rotary(_head_norm(layer.q(x).view(shape), layer.q_norm), cos, signed_sin)
            k = _rotary(_head_norm(layer.k(x).view(shape), layer.k_norm), cos, signed_sin)
            v = layer.v(x).view(shape)
            keys, values = store(index, k, v)
            out = _attention(q, keys, values, attn_mask, self.groups, self.scaling)
            h = layer.o(out).add_(h)  # the residual add (a + b == b + a in floating point)
            x = _rms(h, layer.norm2)
            gated = layer.act(layer.gate(x)).mul_(layer.up(x))
            h = layer.down(gated).add_(h)
        h = _rms(h, self.final_norm)
        return self.lm_head(h[:, -1:, :])[:, -1]  # the shapes the model's forward uses


def _cache_layer(cache: Any, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    layer = cache.layers[index]
    return layer.keys, layer.values


def _attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None,
               groups: int, scaling: float) -> torch.Tensor:
    """SDPA for one query token the way ``transformers`` calls it: grouped-query attention through
    ``enable_gqa`` without a mask, and query heads folded onto their key/value head with one."""
    batch, heads, _, dim = q.shape
    kwargs: dict[str, Any] = {}
    if groups > 1:
        if mask is None and dim <= 256:
            kwargs["enable_gqa"] = True
        else:
            q = q.reshape(batch, heads // groups, groups, dim)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=0.0, scale=scaling, **kwargs)
    return out.reshape(batch, 1, heads * dim)  # (B, H, 1, D) -> (B, 1, H*D), heads in order


# == The check =====================================================================================
#
# On the CPU the fast step (above) is bit-identical to the model's forward: nothing to check. Elsewhere
# the lean decoder checks it once per model, device and dtype (engine.sampling.fast_step_check: the
# tolerance, the check and the verdicts recorded).


EXACT_DEVICE_TYPES = {"cpu"}  # the fast step is bit-identical here (tests compare with torch.equal)


def needs_check(model: Any, kind: str = "fast") -> bool | None:
    """None: the fast step is exact on this model's device (nothing to check). True: not checked
    yet on this device and dtype. False: checked; :func:`fast_step_kept` says with what result.
    ``kind`` "static" asks about the static-shape step (:mod:`engine.sampling.static_decode`)."""
    if model.get_output_embeddings().weight.device.type in EXACT_DEVICE_TYPES:
        return None
    return recorded_verdict(model, kind) is None


def fast_step_kept(model: Any, kind: str = "fast") -> bool:
    """Whether the fast step may run for ``model`` on its device and dtype (exact there, or checked
    and within tolerance)."""
    if needs_check(model, kind) is None:
        return True
    verdict = recorded_verdict(model, kind)
    return verdict is not None and verdict[0]


# == Which loop ====================================================================================

DecodeGraphs = Literal["auto", "on", "off"]


def static_wanted(setting: str, device: torch.device) -> bool:
    """Whether ``decode_graphs`` (auto / on / off) asks for the static path on ``device``: auto is on
    for CUDA only (on the CPU the lean decoder's loop is as fast and needs no buffers)."""
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"decode_graphs must be auto, on or off, got {setting!r}")
    return setting == "on" or (setting == "auto" and device.type == "cuda")
