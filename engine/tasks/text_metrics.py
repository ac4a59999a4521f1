"""Transparent text heuristics for the writing tasks (pure functions, no models).

Each returns a score in [0, 1] so terms are comparable; the docstrings give the exact formula.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z0-9']+")
STOPWORDS = frozenset(
    {
        "a", "an", "the", "and", "or", "but", "if", "then", "of", "to", "in", "on", "at", "by", "for", "with",
        "from", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these",
        "those", "he", "she", "they", "we", "you", "i", "his", "her", "their", "our", "your", "my", "me",
        "him", "them", "us", "not", "no", "so", "do", "does", "did", "has", "have", "had", "will", "would",
        "can", "could", "should", "may", "might", "must", "about", "into", "over", "under", "than", "also",
        "very", "just", "more", "most", "such", "there", "here", "which", "who", "whom", "what", "when",
        "where", "why", "how", "all", "any", "each", "some",
    }
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, apostrophes)."""
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> set[str]:
    """Distinct words that are not stopwords and longer than two characters."""
    return {w for w in words(text) if w not in STOPWORDS and len(w) > 2}


def ramp(value: float, zero_low: float, full_low: float, full_high: float, zero_high: float) -> float:
    """1 inside [full_low, full_high], falling linearly to 0 at zero_low and zero_high."""
    if full_low <= value <= full_high:
        return 1.0
    if value < full_low:
        return 0.0 if value <= zero_low else (value - zero_low) / (full_low - zero_low)
    return 0.0 if value >= zero_high else (zero_high - value) / (zero_high - full_high)


def length_ratio_score(short: str, long: str, *, low: float = 1.6, high: float = 3.2) -> float:
    """How well ``len(long) / len(short)`` (characters) fits [low, high]; 0 at 1.0 and at high + 1.8."""
    if not short.strip() or not long.strip():
        return 0.0
    return ramp(len(long.strip()) / len(short.strip()), 1.0, low, high, high + 1.8)


def word_range_score(text: str, min_words: int, max_words: int) -> float:
    """1 when the word count is within [min_words, max_words], halving credit to 0 outside."""
    n = len(words(text))
    return ramp(float(n), min_words / 2, min_words, max_words, max_words * 2)


def diversity_score(text: str, *, target: float = 0.6) -> float:
    """Type-token ratio (distinct words / words) relative to ``target``, capped at 1."""
    tokens = words(text)
    if not tokens:
        return 0.0
    return min(1.0, (len(set(tokens)) / len(tokens)) / target)


def jaccard(a: set[str], b: set[str]) -> float:
    """|a & b| / |a | b| (0 when both are empty)."""
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def overlap_score(a: str, b: str, *, target: float = 0.2) -> float:
    """Shared content vocabulary of two texts (Jaccard) relative to ``target``, capped at 1."""
    return min(1.0, jaccard(content_words(a), content_words(b)) / target)


def relevance_score(text: str, source: str) -> float:
    """Fraction of the text's content words that also occur in the source."""
    mine = content_words(text)
    if not mine:
        return 0.0
    return len(mine & content_words(source)) / len(mine)
