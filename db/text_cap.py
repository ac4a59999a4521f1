"""The cap on a stored prompt or completion: the first :data:`TEXT_CAP_BYTES` bytes of UTF-8 are kept,
and a longer text ends in a visible marker that names the cap and the text's full length.

A policy can write as much as ``max_new_tokens`` allows and a task can build long prompts; the
transcript page, its search and the export read every stored byte, so one 10 MB completion would
slow them for everyone. Training never sees the cap: the trainer keeps its own texts.

A NUL character (which a small random model samples, and PostgreSQL cannot store in text) is stored
as U+FFFD, the replacement character, on every database alike.
"""

from __future__ import annotations

TEXT_CAP_BYTES = 64 * 1024
"""The most bytes (UTF-8) of one prompt or one completion the store keeps, marker included."""

_MARKER = "\n[… truncated by CoopLab: {length:,} bytes; the store keeps {cap_label} per prompt or completion]"


def _label(cap: int) -> str:
    return f"{cap // 1024} KiB" if cap % 1024 == 0 else f"{cap:,} bytes"


def cap_text(text: str, cap: int = TEXT_CAP_BYTES) -> str:
    """``text`` when its UTF-8 fits in ``cap`` bytes; else its longest prefix that fits together with
    the marker (cut on a character boundary), followed by the marker. NUL characters become U+FFFD."""
    text = text.replace("\x00", "\ufffd")
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= cap:
        return text
    marker = _MARKER.format(length=len(data), cap_label=_label(cap))
    room = max(0, cap - len(marker.encode("utf-8")))
    return data[:room].decode("utf-8", errors="ignore") + marker  # "ignore" drops a character cut in half
