"""Batched sampling of K completions per prompt: one call covers every prompt and every sample.

``generate_completions`` left-pads the prompts, samples ``num_samples`` completions for each in one
batched decode, and returns padded tensors plus masks that are 1 up to and including the first EOS
and 0 after it (so nothing past EOS ever enters a loss). Two decoders give the same tokens:

- ``"lean"``: a plain loop over the model's forward with its KV cache. It applies temperature, top-k
  and top-p exactly as ``transformers``' warpers do (same order, same tie rules), draws with
  ``torch.multinomial`` from the same random stream, and keeps each sampled token's log-prob under
  the unmodified policy. It skips ``generate``'s per-step bookkeeping, and for Llama-family models
  runs each new token through :class:`engine.fast_decode.FastDecoder` (the model's weights without
  its module stack, a pre-allocated KV cache; identical logits), which on small models makes a
  sampling call 1.5-1.8x faster than ``generate``.
- ``"generate"``: Hugging Face ``model.generate`` with an explicit sampling configuration (the
  model's own generation defaults such as repetition penalties are neutralised).

With a ``torch.Generator`` both decoders are deterministic and draw the same random numbers (the
lean decoder uses a private generator, so agents may sample in parallel threads; the ``generate``
decoder seeds a forked global RNG and is meant for one thread at a time).
Sampling runs in ``torch.inference_mode()`` with the model in eval mode; its training mode is
restored afterwards.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from engine.fast_decode import FastDecoder

Decoder = Literal["lean", "generate"]
DEFAULT_DECODER: Decoder = "lean"


@dataclass
class Generation:
    """The result of one batched sampling call over P prompts with K samples each.

    Rows of the completion tensors are prompt-major: row ``p * K + k`` is sample k of prompt p.
    """

    prompt_ids: torch.Tensor  # (P, Lp) left-padded with the pad id
    prompt_mask: torch.Tensor  # (P, Lp) 1 on real prompt tokens
    completion_ids: torch.Tensor  # (P*K, Lc) right-padded with the pad id after EOS
    completion_mask: torch.Tensor  # (P*K, Lc) 1 up to and including the first EOS, 0 after
    texts: list[list[str]]  # [P][K] decoded completions without special tokens
    num_tokens: int  # generated tokens counted by completion_mask
    num_samples: int  # K
    token_logprobs: torch.Tensor | None = None  # (P*K, Lc) log pi(token) under the raw policy (lean decoder)

    @property
    def num_prompts(self) -> int:
        return int(self.prompt_ids.shape[0])

    @property
    def completion_lengths(self) -> torch.Tensor:
        """(P*K,) number of completion tokens of each row, EOS included."""
        return self.completion_mask.sum(dim=1)

    def sequences(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(P*K, Lp+Lc) prompt+completion ids and attention mask, ready for one log-prob forward."""
        k = self.num_samples
        ids = torch.cat([self.prompt_ids.repeat_interleave(k, dim=0), self.completion_ids], dim=1)
        mask = torch.cat([self.prompt_mask.repeat_interleave(k, dim=0), self.completion_mask], dim=1)
        return ids, mask


# ---------------------------------------------------------------------------------------------
# pure helpers


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token lists into (N, L) ids and a 0/1 attention mask."""
    if not sequences or any(len(s) == 0 for s in sequences):
        raise ValueError("every prompt needs at least one token; got an empty prompt")
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, width - len(seq) :] = torch.as_tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq) :] = 1
    return ids, mask


def completion_mask_from_eos(ids: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """(N, L) mask that is 1 up to and including the first EOS of each row and 0 after it."""
    is_eos = torch.isin(ids, torch.as_tensor(list(eos_ids), dtype=ids.dtype, device=ids.device))
    eos_before = is_eos.long().cumsum(dim=1) - is_eos.long()  # EOS tokens strictly before each position
    return (eos_before == 0).long()


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


def eos_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Every id that ends a completion: the tokenizer's eos and the model's generation-config eos."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if configured is not None:
        ids.extend(int(i) for i in (configured if isinstance(configured, list | tuple) else [configured]))
    if not ids:
        raise ValueError("the tokenizer has no eos token; set tokenizer.eos_token before sampling")
    return sorted(set(ids))


def _validate(
    num_samples: int, max_new_tokens: int, temperature: float, top_p: float, top_k: int | None
) -> None:
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}; use do_sample=False for greedy decoding"
        )
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if top_k is not None and top_k < 0:
        raise ValueError(f"top_k must be >= 0 or None, got {top_k}")


def _derive_seed(generator: torch.Generator) -> int:
    """A seed drawn from ``generator`` (advancing it), so every call gets fresh, reproducible draws."""
    return int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())


def _tokenize(
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str] | Sequence[Sequence[int]],
    add_special_tokens: bool,
) -> list[list[int]]:
    if not prompts:
        raise ValueError("generate_completions needs at least one prompt")
    if all(isinstance(p, str) for p in prompts):
        return [
            list(ids) for ids in tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
        ]
    if all(isinstance(p, Sequence) and not isinstance(p, str) for p in prompts):
        return [[int(t) for t in p] for p in prompts]
    raise TypeError("prompts must be all strings or all token-id lists")


# ---------------------------------------------------------------------------------------------
# decoders


@dataclass(frozen=True)
class Decoding:
    """What a decoder needs besides the model and the left-padded prompts (B = P * num_samples rows)."""

    num_samples: int
    max_new_tokens: int
    do_sample: bool
    temperature: float
    top_p: float
    top_k: int | None
    eos_ids: list[int]
    pad_id: int
    seed: int | None  # draws of this call only (the global RNG is left alone); None = unseeded
    fast_decode: bool = True  # the lean decoder's exact fast token step for Llama/Qwen2


def _decode_with_generate(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
                          how: Decoding) -> tuple[torch.Tensor, None]:
    sampling = {"temperature": how.temperature, "top_p": how.top_p, "top_k": how.top_k or 0} if how.do_sample else {}
    config = GenerationConfig(
        max_new_tokens=how.max_new_tokens,
        do_sample=how.do_sample,
        num_beams=1,
        num_return_sequences=how.num_samples,
        eos_token_id=how.eos_ids,
        pad_token_id=how.pad_id,
        repetition_penalty=1.0,
        no_repeat_ngram_size=0,
        min_new_tokens=0,
        typical_p=1.0,
        epsilon_cutoff=0.0,
        eta_cutoff=0.0,
        **sampling,
    )
    devices = [ids.device] if ids.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices, enabled=how.seed is not None):
        if how.seed is not None:
            torch.manual_seed(how.seed)
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    return out[:, ids.shape[1] :], None


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


def _decode_lean(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
                 how: Decoding) -> tuple[torch.Tensor, torch.Tensor]:
    device = ids.device
    num_samples, max_new_tokens, pad_id = how.num_samples, how.max_new_tokens, how.pad_id
    fast = how.fast_decode and max_new_tokens > 1 and FastDecoder.supports(model)
    ids = ids.repeat_interleave(num_samples, dim=0)  # (B, Lp), B = P*K
    mask = mask.repeat_interleave(num_samples, dim=0)
    batch, prompt_len = ids.shape
    positions = (mask.cumsum(dim=1) - 1).masked_fill(mask == 0, 0)
    # like generate: an all-ones mask is dropped (no padding), which lets attention use its causal fast path
    full_mask: torch.Tensor | None = None
    if not bool(mask.all()):
        full_mask = torch.ones((batch, prompt_len + max_new_tokens), dtype=mask.dtype, device=device)
        full_mask[:, :prompt_len] = mask
    rng = None
    if how.seed is not None and how.do_sample:
        rng = torch.Generator(device=device)
        rng.manual_seed(how.seed)
    eos = torch.as_tensor(how.eos_ids, device=device)
    cache_key, accepted = _forward_kwargs(model)
    optional = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}

    tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logprobs = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
    unfinished = torch.ones(batch, dtype=torch.bool, device=device)
    step_ids, step_pos, cache = ids, positions, None
    stepper: FastDecoder | None = None
    steps = 0
    for step in range(max_new_tokens):
        attn = None if full_mask is None else full_mask[:, : prompt_len + step]
        if stepper is not None:
            logits = stepper.step(step_ids, step_pos, attn).to(dtype=torch.float32)
        else:
            if "position_ids" in accepted:
                optional["position_ids"] = step_pos
            out = model(input_ids=step_ids, attention_mask=attn, use_cache=True, **optional, **{cache_key: cache})
            cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
            logits = out.logits[:, -1].to(dtype=torch.float32)
            if fast and hasattr(cache, "layers"):  # the prompt went through the model, new tokens take the fast step
                stepper = FastDecoder(model, cache, batch, prompt_len + max_new_tokens)
                cache = None
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


_DECODERS = {"lean": _decode_lean, "generate": _decode_with_generate}


def generate_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str] | list[list[int]],
    *,
    num_samples: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int | None,
    do_sample: bool = True,
    generator: torch.Generator | None = None,
    decoder: Decoder = DEFAULT_DECODER,
    add_special_tokens: bool = True,
    fast_decode: bool = True,
) -> Generation:
    """Sample ``num_samples`` completions for every prompt in one batched decode (see the module doc).

    ``prompts`` are strings (tokenised with ``add_special_tokens``) or token-id lists. ``top_k`` None
    or 0 and ``top_p`` 1.0 disable those filters; ``do_sample=False`` decodes greedily. ``generator``
    makes the draws reproducible without touching the global RNG. ``fast_decode`` lets the lean
    decoder run Llama/Qwen2 tokens through :class:`engine.fast_decode.FastDecoder` (same logits,
    bit for bit; other models always use their forward); False forces the model's own forward.
    """
    _validate(num_samples, max_new_tokens, temperature, top_p, top_k)
    if decoder not in _DECODERS:
        raise ValueError(f"unknown decoder {decoder!r}; expected one of {sorted(_DECODERS)}")
    eos_ids = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = left_pad(_tokenize(tokenizer, prompts, add_special_tokens), pad_id)
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    seed = _derive_seed(generator) if generator is not None and do_sample else None

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            # greedy decoding gives the same completion K times: decode each prompt once
            completion_ids, token_logprobs = _DECODERS[decoder](model, prompt_ids, prompt_mask, Decoding(
                num_samples=num_samples if do_sample else 1, max_new_tokens=max_new_tokens, do_sample=do_sample,
                temperature=temperature, top_p=top_p, top_k=top_k, eos_ids=eos_ids, pad_id=pad_id, seed=seed,
                fast_decode=fast_decode))
    finally:
        model.train(was_training)
    if not do_sample and num_samples > 1:
        completion_ids = completion_ids.repeat_interleave(num_samples, dim=0)
        if token_logprobs is not None:
            token_logprobs = token_logprobs.repeat_interleave(num_samples, dim=0)

    completion_mask = completion_mask_from_eos(completion_ids, eos_ids)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, pad_id)
    if token_logprobs is not None:
        token_logprobs = token_logprobs * completion_mask
    flat = [
        row[: int(n)]
        for row, n in zip(completion_ids.tolist(), completion_mask.sum(dim=1).tolist(), strict=True)
    ]
    decoded = tokenizer.batch_decode(flat, skip_special_tokens=True)
    texts = [decoded[p * num_samples : (p + 1) * num_samples] for p in range(prompt_ids.shape[0])]
    return Generation(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=completion_ids,
        completion_mask=completion_mask,
        texts=texts,
        num_tokens=int(completion_mask.sum()),
        num_samples=num_samples,
        token_logprobs=token_logprobs,
    )
