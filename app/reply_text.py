"""How an agent's reply is shown (pure functions): whole characters only, and code as code.

A reply is decoded from the tokens the agent generated; when the token limit cuts a multi-byte
character (an accented letter, an emoji) in half, the decoder ends the text with U+FFFD, "\ufffd".
That is not something the agent wrote, so it is left out and the reader is told. Code is shown as
code: Markdown fences (```python ... ```) anywhere in a reply, and the whole reply of a coding task
(the task's ``code`` tag) that has no fences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

REPLACEMENT = "\ufffd"
FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
CODE_TAG = "code"


def whole_characters(text: str) -> tuple[str, bool]:
    """``text`` without the partial character a cut left at its end, and whether one was there:
    ``"br\ufffd"`` → ``("br", True)``. A U+FFFD inside the text is kept (it is not from the cut)."""
    kept = text.rstrip(REPLACEMENT)
    return kept, len(kept) != len(text)


@dataclass(frozen=True)
class Part:
    """A piece of a reply: prose (``language`` None) or code in ``language``."""

    text: str
    language: str | None = None


def reply_parts(text: str, *, code: bool = False, language: str = "python") -> list[Part]:
    """A reply split into prose and code: each fenced block is code in its fence's language (else
    ``language``); with ``code`` (a coding task) a reply without fences is code as a whole. Blank
    prose between the parts is dropped; a fence the token limit left open runs to the end."""
    if code and "```" not in text:
        return [Part(text.strip("\n"), language)] if text.strip() else []
    parts: list[Part] = []
    position = 0
    for match in FENCE.finditer(text):
        before = text[position:match.start()].strip()
        if before:
            parts.append(Part(before))
        parts.append(Part(match.group(2).rstrip("\n"), match.group(1).lower() or language))
        position = match.end()
    rest = text[position:].strip()
    if rest:
        parts.append(Part(rest))
    return parts


def is_code_task(config: dict[str, Any], catalog: dict[str, Any]) -> bool:
    """Whether the run's task writes code (its catalog entry carries the ``code`` tag)."""
    info = catalog.get(str((config.get("task") or {}).get("name") or ""))
    return CODE_TAG in (getattr(info, "tags", ()) or ())
