"""Batched sampling of K completions per prompt: one call covers every prompt and every sample.

K is the run's ``num_generations`` setting, read from the trainer's config and passed down as an int
under the same name (the decoders' ``num_generations`` argument, :class:`Generation`); the formulas
write it K.
``generate_completions`` left-pads the prompts, samples ``num_generations`` completions for each in one
batched decode, and returns padded tensors plus masks that are 1 up to and including the first EOS
and 0 after it (so nothing past EOS ever enters a loss). Two decoders give the same tokens:

- ``"lean"``: a plain loop over the model's forward with its KV cache. It applies temperature, top-k
  and top-p exactly as ``transformers``' warpers do (same order, same tie rules), draws with
  ``torch.multinomial`` from the same random stream, and keeps each sampled token's log-prob under
  the unmodified policy. It encodes each prompt once and repeats its KV cache to the prompt's K
  sample rows (:mod:`engine.sampling.decoder`), skips ``generate``'s per-step bookkeeping, and for
  Llama-family models runs each new token through :class:`engine.sampling.decoder.FastDecoder` (the model's weights without
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

import functools
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from engine.sampling.decoder import (
    DecodeGraphs,
    Decoding,
    decode_lean,
    filter_logits,
    forward_cache_argument,
    static_wanted,
)
from engine.sampling.static_decode import decode_static

__all__ = ["Generation", "completion_mask_from_eos", "decode_completions", "eos_token_ids", "filter_logits",
           "forward_cache_argument", "generate_completions", "incomplete_tail_length", "left_pad"]

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


def _decode_with_generate(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, num_generations: int,
                          how: Decoding) -> tuple[torch.Tensor, None]:
    sampling = {"temperature": how.temperature, "top_p": how.top_p, "top_k": how.top_k or 0} if how.do_sample else {}
    config = GenerationConfig(
        max_new_tokens=how.max_new_tokens,
        do_sample=how.do_sample,
        num_beams=1,
        num_return_sequences=num_generations,
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
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)  # type: ignore[operator]
    return out[:, ids.shape[1] :], None


def user_generate(model: object) -> bool:
    """Whether ``model.generate`` is the user's: set on the instance (patched), or defined by a class
    outside ``transformers``, ``peft`` and CoopLab (subclassed)."""
    if "generate" in vars(model):
        return True
    module = getattr(getattr(type(model), "generate", None), "__module__", None) or ""
    return bool(module) and not module.startswith(("transformers", "peft", "engine"))


def _decode_with_user_generate(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor,
                               num_generations: int, how: Decoding) -> tuple[torch.Tensor, None]:
    """The user's ``generate``, called as CoMLRL calls it: one unpadded prompt per call, K return
    sequences, sampling settings as keywords; a tensor or an output with ``.sequences`` is read."""
    rows: list[torch.Tensor] = []
    devices = [ids.device] if ids.device.type == "cuda" else []
    for prompt, keep in zip(ids, mask, strict=True):
        real = prompt[keep.bool()].unsqueeze(0)
        kwargs = {"input_ids": real, "attention_mask": torch.ones_like(real), "max_new_tokens": how.max_new_tokens,
                  "do_sample": how.do_sample, "num_beams": 1, "num_return_sequences": num_generations,
                  "return_dict_in_generate": True, "pad_token_id": how.pad_id}
        if how.do_sample:
            kwargs.update(temperature=how.temperature, top_p=how.top_p)
            if how.top_k is not None:
                kwargs["top_k"] = how.top_k
        with torch.random.fork_rng(devices=devices, enabled=how.seed is not None):
            if how.seed is not None:
                torch.manual_seed(how.seed)
            out = model.generate(**kwargs)  # type: ignore[operator]
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
    decoder run Llama/Qwen2/Qwen3/Mistral tokens through :class:`engine.sampling.decoder.FastDecoder` (same
    logits, bit for bit; other models always use their forward); False forces the model's own forward.
    ``share_prompt_cache`` lets the lean decoder encode each prompt once and repeat its KV cache to
    its K sample rows (the same samples; a log-prob may differ in its last bit on short prompts, see
    :func:`engine.sampling.decoder._prefill`); False encodes K copies. ``share_prompt_prefix`` (with
    ``share_prompt_cache``) lets it encode a long token prefix that several prompts share once and only
    their suffixes per prompt (:mod:`engine.sampling.decoder`; the same samples, log-probs within ~1e-6);
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
            samples = num_generations if do_sample else 1
            completion_ids, token_logprobs = decode(model, prompt_ids, prompt_mask, samples, Decoding(
                max_new_tokens=max_new_tokens,
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


# == Completion text in whole characters ===========================================================
#
# Completion token ids to text, in whole characters.
#
# A completion cut by ``max_new_tokens`` (or by EOS) can end inside a multi-byte character: byte-level
# tokenizers hold one byte per token for characters they have not merged, so the first byte of "日"
# may be the last token sampled. The tokenizer's own decoding renders such an incomplete sequence as
# U+FFFD. :func:`decode_completions` drops exactly that incomplete trailing sequence and changes nothing
# else: complete characters (a generated U+FFFD included) and invalid bytes in the middle of a completion
# come out as the tokenizer decodes them.
#
# Only byte-level (GPT-2 style) and byte-fallback (SentencePiece style) tokenizers can cut a character;
# for any other tokenizer the text is left as decoded.

REPLACEMENT = "\ufffd"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_MAX_INCOMPLETE = 3  # the longest UTF-8 sequence is 4 bytes, so at most 3 can be pending
# Lead byte -> (sequence length, allowed range of the second byte); later bytes are 0x80-0xBF.
_LEADS = ({b: (2, (0x80, 0xBF)) for b in range(0xC2, 0xE0)}
          | {b: (3, (0x80, 0xBF)) for b in range(0xE1, 0xF0)} | {0xE0: (3, (0xA0, 0xBF)), 0xED: (3, (0x80, 0x9F))}
          | {b: (4, (0x80, 0xBF)) for b in range(0xF1, 0xF4)} | {0xF0: (4, (0x90, 0xBF)), 0xF4: (4, (0x80, 0x8F))})


def decode_completions(tokenizer: PreTrainedTokenizerBase, rows: Sequence[Sequence[int]]) -> list[str]:
    """``tokenizer.batch_decode(rows, skip_special_tokens=True)``, without the U+FFFD a completion
    ends with when its last tokens hold only the start of a multi-byte character."""
    texts = tokenizer.batch_decode(rows, skip_special_tokens=True)  # type: ignore[arg-type]
    if not any(text.endswith(REPLACEMENT) for text in texts):
        return texts
    reader = _byte_reader(tokenizer)
    if reader is None:
        return texts
    special = set(tokenizer.all_special_ids)
    return [_whole(tokenizer, reader, [int(i) for i in row if int(i) not in special], text)
            if text.endswith(REPLACEMENT) else text for row, text in zip(rows, texts, strict=True)]


def incomplete_tail_length(data: bytes) -> int:
    """How many bytes at the end of ``data`` start a UTF-8 character without finishing it (0 to 3).
    Invalid bytes are not an incomplete character: only a valid prefix of one counts (Unicode's
    table of well-formed byte sequences, so an encoded surrogate's start does not)."""
    for back in range(1, min(_MAX_INCOMPLETE, len(data)) + 1):
        lead = data[-back]
        if 0x80 <= lead <= 0xBF:
            continue  # a continuation byte: look further back for the lead
        length, second = _LEADS.get(lead, (0, (0, 0)))
        if length <= back:
            return 0  # a complete character, or not a lead byte at all
        if back > 1 and not second[0] <= data[-back + 1] <= second[1]:
            return 0
        return back
    return 0


def _whole(tokenizer: PreTrainedTokenizerBase, reader: Callable[[int], bytes | None], ids: list[int],
           text: str) -> str:
    # The bytes of the last tokens, enough to hold any incomplete character.
    pieces: list[bytes] = []
    for token_id in reversed(ids):
        piece = reader(token_id)
        if piece is None:
            return text
        pieces.insert(0, piece)
        if sum(map(len, pieces)) > _MAX_INCOMPLETE:
            break
    pending = incomplete_tail_length(b"".join(pieces))
    if pending == 0:
        return text  # the U+FFFD is a generated character or stands for invalid bytes: keep it
    held = 0
    for count, piece in enumerate(reversed(pieces), start=1):
        held += len(piece)
        if held == pending:  # the incomplete character fills whole tokens: decode without them
            return tokenizer.decode(ids[:-count], skip_special_tokens=True)  # type: ignore[return-value]
        if held > pending:
            break
    # The last token also holds complete characters: byte-level decoding renders the incomplete
    # rest as one U+FFFD at the very end.
    return text[: -len(REPLACEMENT)]


def _byte_reader(tokenizer: PreTrainedTokenizerBase) -> Callable[[int], bytes | None] | None:
    """A function from a token id to the bytes it decodes to, or None for tokenizers that cannot cut
    a character."""
    kind = _decoder_kind(tokenizer)
    if kind is None:
        return None
    added = {i: token.content for i, token in tokenizer.added_tokens_decoder.items()}
    table = _byte_level_table() if kind == "byte_level" else {}

    def read(token_id: int) -> bytes | None:
        if token_id in added:
            return added[token_id].encode("utf-8")
        piece = tokenizer.convert_ids_to_tokens(token_id)
        if not isinstance(piece, str):
            return None
        if kind == "byte_level":
            if all(ch in table for ch in piece):
                return bytes(table[ch] for ch in piece)
            return piece.encode("utf-8")
        byte = _BYTE_PIECE.fullmatch(piece)
        return bytes([int(byte.group(1), 16)]) if byte else piece.replace("\u2581", " ").encode("utf-8")

    return read


def _decoder_kind(tokenizer: PreTrainedTokenizerBase) -> str | None:
    """``"byte_level"``, ``"byte_fallback"`` or None, from the tokenizer's decoder."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None)
    if decoder is None:
        return "byte_level" if isinstance(getattr(tokenizer, "byte_decoder", None), dict) else None
    try:
        spec = json.loads(decoder.__getstate__())
    except (TypeError, ValueError):
        return None
    types = {spec.get("type")} | {part.get("type") for part in spec.get("decoders", ()) if isinstance(part, dict)}
    if "ByteLevel" in types:
        return "byte_level"
    if "ByteFallback" in types:
        return "byte_fallback"
    return None


@functools.cache
def _byte_level_table() -> dict[str, int]:
    """The byte-level alphabet's character for each byte, inverted: the printable Latin-1 bytes stand
    for themselves, the other 68 bytes for the characters from U+0100 on, in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in table.values()]
    table.update({chr(0x100 + n): b for n, b in enumerate(others)})
    return table
