"""The supported pattern families: their exact regex strings and the data that sets them apart.

A family is recognised only from its exact pattern string (as written in a
``tokenizer.json``) or its name; anything else is refused with
``UnsupportedPatternError``, never split some other way. Families differ by data
only: whether ``\\p{M}`` counts as a letter, and how many numbers a piece takes.
"""

from __future__ import annotations

from typing import Final

_CONTRACTIONS: Final = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_SPACES: Final = r"\s*[\r\n]+|\s+(?!\S)|\s+"

PATTERNS: Final[dict[str, str]] = {
    # Llama-3, 3.1, 3.2, and GPT-4's cl100k as HuggingFace tokenizer.json files write it.
    "llama3": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _SPACES,
    # Qwen2, 2.5, 3: one number per piece.
    "qwen2": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _SPACES,
    # Qwen3.5, 3.6: marks join letters.
    "qwen3.5": _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
    + _SPACES,
}
"""Family name -> the exact pattern string it stands for."""


class UnsupportedPatternError(ValueError):
    """A pattern string or family name that peek2 does not implement."""


class Family:
    """What sets one family apart: its name, pattern, and two parameters of the scanner."""

    def __init__(self, name: str, marks_are_letters: bool, max_digits: int) -> None:
        self.name: Final = name
        self.pattern: Final = PATTERNS[name]
        self.marks_are_letters: Final = marks_are_letters
        self.max_digits: Final = max_digits

    def __repr__(self) -> str:
        return f"Family({self.name!r})"


FAMILIES: Final[dict[str, Family]] = {
    "llama3": Family("llama3", marks_are_letters=False, max_digits=3),
    "qwen2": Family("qwen2", marks_are_letters=False, max_digits=1),
    "qwen3.5": Family("qwen3.5", marks_are_letters=True, max_digits=1),
}

_BY_PATTERN: Final[dict[str, Family]] = {family.pattern: family for family in FAMILIES.values()}


def _clip(text: str, limit: int = 80) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _nearest_difference(pattern: str) -> str:
    """Where ``pattern`` first departs from the family pattern sharing its longest prefix."""
    best_name, best_at = "", -1
    for name, known in PATTERNS.items():
        at = 0
        while at < len(pattern) and at < len(known) and pattern[at] == known[at]:
            at += 1
        if at > best_at:
            best_name, best_at = name, at
    known = PATTERNS[best_name]
    return (
        f"nearest family {best_name!r} differs at character {best_at}: "
        f"got {_clip(pattern[best_at:best_at + 20], 20)}, expected {_clip(known[best_at:best_at + 20], 20)}"
    )


def find_family(pattern_or_name: str) -> Family:
    """The family named ``pattern_or_name``, or whose exact pattern string it is.

    >>> find_family("qwen2").max_digits
    1
    >>> find_family(PATTERNS["llama3"]).name
    'llama3'

    Raises:
        TypeError: ``pattern_or_name`` is not a str.
        UnsupportedPatternError: neither a family name nor a supported pattern string.
    """
    if not isinstance(pattern_or_name, str):
        raise TypeError(f"pattern must be a family name or a pattern string, not {type(pattern_or_name).__name__}")
    family = FAMILIES.get(pattern_or_name) or _BY_PATTERN.get(pattern_or_name)
    if family is not None:
        return family
    names = ", ".join(FAMILIES)
    if len(pattern_or_name) < 16 and "\\" not in pattern_or_name:
        raise UnsupportedPatternError(f"unknown pattern family {pattern_or_name!r}; supported families: {names}")
    raise UnsupportedPatternError(
        f"unsupported pre-tokenizer pattern {_clip(pattern_or_name)}: peek2 implements only the exact "
        f"patterns of the families {names} (see peek2.PATTERNS); {_nearest_difference(pattern_or_name)}"
    )
