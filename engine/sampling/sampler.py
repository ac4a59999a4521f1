"""Batched sampling of K completions per prompt: one call covers every prompt and every sample.

K is the run's ``num_generations`` setting, under the same name from the settings catalog to the
decoders (:class:`engine.sampling.lean_decoder.Decoding`, :class:`Generation`); the formulas write it K.
``generate_completions`` left-pads the prompts, samples ``num_generations`` completions for each in one
batched decode, and returns padded tensors plus masks that are 1 up to and including the first EOS
and 0 after it (so nothing past EOS ever enters a loss). Two decoders give the same tokens:

- ``"lean"``: a plain loop over the model's forward with its KV cache. It applies temperature, top-k
  and top-p exactly as ``transformers``' warpers do (same order, same tie rules), draws with
  ``torch.multinomial`` from the same random stream, and keeps each sampled token's log-prob under
  the unmodified policy. It encodes each prompt once and repeats its KV cache to the prompt's K
  sample rows (:mod:`engine.sampling.lean_decoder`), skips ``generate``'s per-step bookkeeping, and for
  Llama-family models runs each new token through :class:`engine.sampling.fast_decode.FastDecoder` (the model's weights without
  its module stack, a pre-allocated KV cache; identical logits), which on small models makes a
  sampling call 1.5-1.8x faster than ``generate``.
- ``"generate"``: Hugging Face ``model.generate`` with an explicit sampling configuration (the
  model's own generation defaults such as repetition penalties are neutralised).

A model whose ``generate`` is the user's (patched on the instance, or defined by a class outside
``transformers``/``peft``: :func:`user_generate`) is always sampled through it, one prompt per call
with CoMLRL's keyword arguments (``num_return_sequences``, ``return_dict_in_generate=True``, ...), as
a CoMLRL trainer samples: a script or test that patched ``generate`` sees its calls.

With a ``torch.Generator`` both decoders are deterministic and draw the same random numbers (the
lean decoder uses a private generator, so agents may sample in parallel threads; the ``generate``
decoder seeds a forked global RNG and is meant for one thread at a time).
Sampling runs in ``torch.inference_mode()`` with the model in eval mode; its training mode is
restored afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from engine.sampling.decode_text import decode_completions
from engine.sampling.lean_decoder import Decoding, decode_lean, filter_logits, forward_cache_argument
from engine.sampling.static_decode import DecodeGraphs, decode_static, static_wanted

__all__ = ["Generation", "completion_mask_from_eos", "eos_token_ids", "filter_logits", "forward_cache_argument",
           "generate_completions", "left_pad"]

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
    num_generations: int  # K
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
        rows = self.num_generations  # each prompt's row repeated for its K completions
        ids = torch.cat([self.prompt_ids.repeat_interleave(rows, dim=0), self.completion_ids], dim=1)
        mask = torch.cat([self.prompt_mask.repeat_interleave(rows, dim=0), self.completion_mask], dim=1)
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
    num_generations: int, max_new_tokens: int, temperature: float, top_p: float, top_k: int | None
) -> None:
    if num_generations < 1:
        raise ValueError(f"num_generations must be >= 1, got {num_generations}")
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


_TOKENIZER_LOCK = threading.Lock()


def _tokenize(
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str] | Sequence[Sequence[int]],
    add_special_tokens: bool,
) -> list[list[int]]:
    if not prompts:
        raise ValueError("generate_completions needs at least one prompt")
    if all(isinstance(p, str) for p in prompts):
        with _TOKENIZER_LOCK:  # agents in threads may share one fast tokenizer, whose Rust state is not reentrant
            encoded = tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
        return [list(ids) for ids in encoded]
    if all(isinstance(p, Sequence) and not isinstance(p, str) for p in prompts):
        return [[int(t) for t in p] for p in prompts]
    raise TypeError("prompts must be all strings or all token-id lists")


# ---------------------------------------------------------------------------------------------
# decoders


def _decode_with_generate(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
                          how: Decoding) -> tuple[torch.Tensor, None]:
    sampling = {"temperature": how.temperature, "top_p": how.top_p, "top_k": how.top_k or 0} if how.do_sample else {}
    config = GenerationConfig(
        max_new_tokens=how.max_new_tokens,
        do_sample=how.do_sample,
        num_beams=1,
        num_return_sequences=how.num_generations,
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


def user_generate(model: object) -> bool:
    """Whether ``model.generate`` is the user's: set on the instance (patched), or defined by a class
    outside ``transformers``, ``peft`` and CoopLab (subclassed)."""
    if "generate" in vars(model):
        return True
    module = getattr(getattr(type(model), "generate", None), "__module__", None) or ""
    return bool(module) and not module.startswith(("transformers", "peft", "engine"))


def _decode_with_user_generate(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
                               how: Decoding) -> tuple[torch.Tensor, None]:
    """The user's ``generate``, called as CoMLRL calls it: one unpadded prompt per call, K return
    sequences, sampling settings as keywords; a tensor or an output with ``.sequences`` is read."""
    rows: list[torch.Tensor] = []
    devices = [ids.device] if ids.device.type == "cuda" else []
    for prompt, keep in zip(ids, mask, strict=True):
        real = prompt[keep.bool()].unsqueeze(0)
        kwargs = {"input_ids": real, "attention_mask": torch.ones_like(real), "max_new_tokens": how.max_new_tokens,
                  "do_sample": how.do_sample, "num_beams": 1, "num_return_sequences": how.num_generations,
                  "return_dict_in_generate": True, "pad_token_id": how.pad_id}
        if how.do_sample:
            kwargs.update(temperature=how.temperature, top_p=how.top_p)
            if how.top_k is not None:
                kwargs["top_k"] = how.top_k
        with torch.random.fork_rng(devices=devices, enabled=how.seed is not None):
            if how.seed is not None:
                torch.manual_seed(how.seed)
            out = model.generate(**kwargs)
        sequences = getattr(out, "sequences", out)
        rows.extend(sequences[:, real.shape[1]:].to(ids.device))
    width = max(1, *(len(row) for row in rows))
    completion = torch.full((len(rows), width), how.pad_id, dtype=torch.long, device=ids.device)
    for i, row in enumerate(rows):
        completion[i, :len(row)] = row
    return completion, None


_DECODERS = {"lean": decode_lean, "generate": _decode_with_generate}


def generate_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str] | list[list[int]],
    *,
    num_generations: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int | None,
    do_sample: bool = True,
    generator: torch.Generator | None = None,
    decoder: Decoder = DEFAULT_DECODER,
    add_special_tokens: bool = True,
    fast_decode: bool = True,
    share_prompt_cache: bool = True,
    share_prompt_prefix: bool = True,
    decode_graphs: DecodeGraphs = "auto",
) -> Generation:
    """Sample ``num_generations`` completions for every prompt in one batched decode (see the module doc).

    ``prompts`` are strings (tokenised with ``add_special_tokens``) or token-id lists. ``top_k`` None
    or 0 and ``top_p`` 1.0 disable those filters; ``do_sample=False`` decodes greedily. ``generator``
    makes the draws reproducible without touching the global RNG. ``fast_decode`` lets the lean
    decoder run Llama/Qwen2/Qwen3/Mistral tokens through :class:`engine.sampling.fast_decode.FastDecoder` (same
    logits, bit for bit; other models always use their forward); False forces the model's own forward.
    ``share_prompt_cache`` lets the lean decoder encode each prompt once and repeat its KV cache to
    its K sample rows (the same samples; a log-prob may differ in its last bit on short prompts, see
    :func:`engine.sampling.lean_decoder._prefill`); False encodes K copies. ``share_prompt_prefix`` (with
    ``share_prompt_cache``) lets it encode a long token prefix that several prompts share once and only
    their suffixes per prompt (:mod:`engine.sampling.shared_prefix`; the same samples, log-probs within ~1e-6);
    False encodes every prompt in full. ``decode_graphs`` (auto: on for CUDA) runs the lean decoder's
    token loop through :mod:`engine.sampling.static_decode` (a static KV cache, CUDA graphs, no host wait per
    token; the same tokens as the lean loop on the CPU) when ``fast_decode`` is on; off: the lean loop.
    """
    _validate(num_generations, max_new_tokens, temperature, top_p, top_k)
    if decoder not in _DECODERS:
        raise ValueError(f"unknown decoder {decoder!r}; expected one of {sorted(_DECODERS)}")
    eos_ids = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = left_pad(_tokenize(tokenizer, prompts, add_special_tokens), pad_id)
    prompt_ids, prompt_mask = prompt_ids.to(device), prompt_mask.to(device)
    seed = _derive_seed(generator) if generator is not None and do_sample else None
    static = decoder == "lean" and static_wanted(decode_graphs, device) and fast_decode

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            # greedy decoding gives the same completion K times: decode each prompt once
            decode = _decode_with_user_generate if user_generate(model) else (
                decode_static if static else _DECODERS[decoder])
            completion_ids, token_logprobs = decode(model, prompt_ids, prompt_mask, Decoding(
                num_generations=num_generations if do_sample else 1, max_new_tokens=max_new_tokens,
                do_sample=do_sample, temperature=temperature, top_p=top_p, top_k=top_k, eos_ids=eos_ids,
                pad_id=pad_id, seed=seed,
                fast_decode=fast_decode, share_prompt=share_prompt_cache,
                share_prefix=share_prompt_prefix))
    finally:
        model.train(was_training)
    if not do_sample and num_generations > 1:
        completion_ids = completion_ids.repeat_interleave(num_generations, dim=0)
        if token_logprobs is not None:
            token_logprobs = token_logprobs.repeat_interleave(num_generations, dim=0)

    completion_mask = completion_mask_from_eos(completion_ids, eos_ids)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, pad_id)
    if token_logprobs is not None:
        token_logprobs = token_logprobs * completion_mask
    flat = [
        row[: int(n)]
        for row, n in zip(completion_ids.tolist(), completion_mask.sum(dim=1).tolist(), strict=True)
    ]
    decoded = decode_completions(tokenizer, flat)
    texts = [decoded[p * num_generations : (p + 1) * num_generations] for p in range(prompt_ids.shape[0])]
    return Generation(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=completion_ids,
        completion_mask=completion_mask,
        texts=texts,
        num_tokens=int(completion_mask.sum()),
        num_generations=num_generations,
        token_logprobs=token_logprobs,
    )
