"""Completion token ids to text, in whole characters.

A completion cut by ``max_new_tokens`` (or by EOS) can end inside a multi-byte character: byte-level
tokenizers hold one byte per token for characters they have not merged, so the first byte of "日"
may be the last token sampled. The tokenizer's own decoding renders such an incomplete sequence as
U+FFFD. :func:`decode_completions` drops exactly that incomplete trailing sequence and changes nothing
else: complete characters (a generated U+FFFD included) and invalid bytes in the middle of a completion
come out as the tokenizer decodes them.

Only byte-level (GPT-2 style) and byte-fallback (SentencePiece style) tokenizers can cut a character;
for any other tokenizer the text is left as decoded.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence

from transformers import PreTrainedTokenizerBase

__all__ = ["decode_completions", "incomplete_tail_length"]

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
    texts = tokenizer.batch_decode(rows, skip_special_tokens=True)
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
            return tokenizer.decode(ids[:-count], skip_special_tokens=True)
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
