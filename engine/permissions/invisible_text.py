"""Stripping characters a reader cannot see from text a model will read.

Text that one agent's output shapes (a test failure its code raised, the feedback built from it)
becomes part of another agent's next prompt. Characters that render as nothing can carry a message
no person reviewing the transcript sees: the tag block U+E0000–E007F spells invisible ASCII, and
zero-width, direction and filler characters hide or reorder what is shown. :func:`strip_invisible`
removes, by Unicode category and property rather than by a list of known tricks:

- format characters (category Cf: zero-width spaces and joiners, direction marks and isolates,
  U+061C, U+00AD, U+180E, U+2060–2064, U+FEFF, the tag characters, ...);
- private-use (Co), unassigned (Cn, in Python's Unicode database) and surrogate (Cs) code points;
- control characters (Cc) other than newline and tab (a carriage return becomes a newline);
- the remaining default-ignorable code points, which are letters or marks by category: variation
  selectors (U+FE00–FE0F, U+E0100–E01EF, Mongolian U+180B–180F), Hangul fillers (U+115F, U+1160,
  U+3164, U+FFA0), the combining grapheme joiner U+034F and Khmer U+17B4/U+17B5;
- letters and symbols whose glyph is blank (:data:`BLANK_GLYPHS`): the braille blank U+2800, the
  musical null notehead U+1D159 and the Khitan filler U+16FE4.

Blanks that are spaces stay spaces, as plain ones: every space separator (category Zs: U+00A0,
U+1680, U+2000–200A, U+202F, U+205F, U+3000) becomes U+0020, so the choice among them carries
nothing; the line and paragraph separators (Zl, Zp: U+2028, U+2029) become newlines.

Ordinary text in every script, punctuation, symbols, emoji, newlines and tabs stay.
"""

from __future__ import annotations

import unicodedata

INVISIBLE_CATEGORIES = frozenset({"Cf", "Co", "Cn", "Cs"})
"""Unicode general categories removed whole: format, private use, unassigned, surrogate."""

_IGNORABLE_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xE0000, 0xE0FFF),
)
"""Default-ignorable code points outside the categories above (and the whole tag/selector plane
block U+E0000–E0FFF, whatever its category)."""

BLANK_GLYPHS = frozenset("\u2800\U0001d159\U00016fe4")
"""Letters and symbols (not spaces, not default-ignorable) that render as an empty cell."""

_PLAIN = {"Zs": 0x20, "Zl": 0x0A, "Zp": 0x0A}
"""What the separators become: a plain space, a newline."""

_KEPT_CONTROLS = frozenset("\n\t")


class _Removals(dict):
    """``str.translate`` table: each character looked up once, then remembered (None removes it; a
    separator maps to a plain space or a newline)."""

    def __missing__(self, code: int) -> int | None:
        value = None if is_invisible(chr(code)) else _PLAIN.get(unicodedata.category(chr(code)), code)
        if len(self) < 65_536:  # a bounded cache; beyond it, each lookup is computed again
            self[code] = value
        return value


_REMOVALS = _Removals()


def is_invisible(char: str) -> bool:
    """True for one character :func:`strip_invisible` removes (newline and tab are kept)."""
    if char in _KEPT_CONTROLS:
        return False
    category = unicodedata.category(char)
    if category in INVISIBLE_CATEGORIES or category == "Cc":
        return True
    code = ord(char)
    return char in BLANK_GLYPHS or any(low <= code <= high for low, high in _IGNORABLE_RANGES)


def strip_invisible(text: str) -> str:
    """``text`` without the invisible characters listed in the module docstring; ``\\r\\n``, ``\\r``
    and the line and paragraph separators become ``\\n``, every other space separator a plain space;
    newlines and tabs stay."""
    return str(text).replace("\r\n", "\n").replace("\r", "\n").translate(_REMOVALS)
