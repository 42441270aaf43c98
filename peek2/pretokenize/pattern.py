"""``Peek2Pattern``, the public pre-tokenizer's class, and ``resolve``, which ``peek2.split`` uses.

This is the boundary in front of the compiled scanner (``peek2.pretokenize.scanner``): it checks
types, resolves a family from a name or pattern string once (cached), and hands
the scanner the family's category table and digit limit. ``peek2.split`` and ``split_offsets``
are plain Python in ``peek2.pretokenize.public``, where ``help()`` finds their docstrings.
"""

from __future__ import annotations

from typing import Final, Union

from peek2.pretokenize import scanner
from peek2.pretokenize.families import find_family


class Peek2Pattern:
    """A pattern family ready to split text (its docstring, with examples: ``peek2.pretokenize.public``)."""

    def __init__(self, pattern: object = "llama3") -> None:
        # (arguments typed object in this compiled module, checked here: mypyc's own check named
        # no parameter, "str object expected; got None"; a bug hunt)
        if not isinstance(pattern, str):
            raise TypeError(_not_pattern(pattern))
        family = find_family(pattern)
        self.family: Final = family.name
        self.pattern: Final = family.pattern
        self._rules: Final = family.rules
        self._stage2: Final = family.stage2

    def split(self, text: object) -> list[str]:
        """The pieces of ``text``; raises TypeError for non-str, ValueError for a lone surrogate."""
        if not isinstance(text, str):
            raise TypeError(_not_text(text))
        return scanner.split_pieces(text, self._stage2, self._rules)

    def split_offsets(self, text: object) -> list[tuple[int, int]]:
        """The ``(start, end)`` character offsets of the pieces of ``text``."""
        if not isinstance(text, str):
            raise TypeError(_not_text(text))
        return scanner.split_offsets(text, self._stage2, self._rules)

    def split_ends(self, text: object) -> list[int]:
        """The end offset of each piece (the compact form: starts are the previous ends)."""
        if not isinstance(text, str):
            raise TypeError(_not_text(text))
        return scanner.split_ends(text, self._stage2, self._rules)

    def __repr__(self) -> str:
        return f"Peek2Pattern({self.family!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Peek2Pattern) and other.family == self.family

    def __hash__(self) -> int:
        return hash(self.family)

    def __reduce__(self) -> tuple[type[Peek2Pattern], tuple[str]]:
        return (Peek2Pattern, (self.family,))


def _not_text(text: object) -> str:
    hint = "; decode bytes first" if isinstance(text, (bytes, bytearray)) else ""
    return f"text must be str, not {type(text).__name__}{hint}"


def _not_pattern(pattern: object) -> str:
    return f"pattern must be a family name or pattern string (str) or a Peek2Pattern, not {type(pattern).__name__}"


PatternLike = Union[str, Peek2Pattern]

_RESOLVED: Final[dict[str, Peek2Pattern]] = {}


def resolve(pattern: object) -> Peek2Pattern:
    """``pattern`` as a Peek2Pattern; names and pattern strings are resolved once and cached."""
    if isinstance(pattern, Peek2Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise TypeError(_not_pattern(pattern))
    resolved = _RESOLVED.get(pattern)
    if resolved is None:
        resolved = Peek2Pattern(pattern)
        _RESOLVED[pattern] = resolved
    return resolved
