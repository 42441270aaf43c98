"""The supported pattern families: their exact regex strings and the data that sets them apart.

A family is recognised only from its exact pattern string (as written in a
``tokenizer.json``, or for DeepSeek-V3 its exact sequence of three) or its name;
anything else is refused with ``UnsupportedPatternError``, never split some other
way. Families differ by data only: the scanner's shape (classic, cased, deepseek, gpt2),
how many numbers a piece takes, whether ``\\p{M}`` counts as a letter, whether a
cased word takes a contraction after it, what may trail punctuation, and whether a
whitespace run that ends the text is one piece (tiktoken's cl100k).
"""

from __future__ import annotations

from typing import Final

from peek2.pretokenize import scanner
from peek2.pretokenize.tables import (
    CLASS_APOSTROPHE,
    CLASS_ASCII_LOWER,
    CLASS_ASCII_PUNCT,
    CLASS_ASCII_UPPER,
    CLASS_CJK_LETTER,
    CLASS_CJK_MARK,
    CLASS_CJK_PUNCT,
    CLASS_CJK_UNASSIGNED,
    CLASS_CONTROL,
    CLASS_COUNT,
    CLASS_LETTER,
    CLASS_LOWER,
    CLASS_MARK,
    CLASS_NEWLINE,
    CLASS_NUMBER,
    CLASS_OTHER,
    CLASS_SPACE,
    CLASS_SURROGATE,
    CLASS_UPPER,
    CLASS_WHITESPACE,
    LETTER_CLASSES,
    MARK_CLASSES,
    STAGE2,
)

_CONTRACTIONS: Final = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_SPACES: Final = r"\s*[\r\n]+|\s+(?!\S)|\s+"
_CASED_UPPER: Final = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_CASED_LOWER: Final = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_PREFIX: Final = r"[^\r\n\p{L}\p{N}]?"


def _cased(suffix: str, numbers: str) -> str:
    """The o200k pattern and its relatives: two cased words, numbers, punctuation, whitespace."""
    return (
        f"{_PREFIX}{_CASED_UPPER}*{_CASED_LOWER}+{suffix}|{_PREFIX}{_CASED_UPPER}+{_CASED_LOWER}*{suffix}|"
        + numbers
        + r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
        + _SPACES
    )


PATTERNS: Final[dict[str, str]] = {
    # Llama-3, 3.1, 3.2, and GPT-4's cl100k as HuggingFace tokenizer.json files write it.
    "llama3": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _SPACES,
    # Qwen2, 2.5, 3: one number per piece.
    "qwen2": _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _SPACES,
    # Qwen3.5, 3.6: marks join letters.
    "qwen3.5": _CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
    + _SPACES,
    # GPT-4o, o1/o3, gpt-oss, Llama-4, MiniMax (tiktoken's o200k_base): words split at case changes.
    "o200k": _cased(_CONTRACTIONS + "?", r"\p{N}{1,3}"),
    # Mistral's Tekken: o200k without the contractions, one number per piece.
    "tekken": _cased("", r"\p{N}"),
    # GPT-2, GPT-3 (r50k, p50k), RoBERTa, BART...: tokenizers' ByteLevel(use_regex=true) splits
    # with this regex; in a tokenizer.json it is that pre-tokenizer, not a Split.
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}
"""Family name -> the exact pattern string it stands for (families of one Split; see SEQUENCES)."""

TIKTOKEN_PATTERNS: Final[dict[str, str]] = {
    # tiktoken's own cl100k_base (GPT-4, GPT-3.5): llama3's pieces, but with \s++$ first a run of
    # whitespace that ends the text is one piece (tokenizers' files of cl100k split it). Only
    # tiktoken means this by it: Oniguruma reads \p{N}{1,3}+ as (\p{N}{1,3})+, all the digits in
    # one piece, so a tokenizer.json holding this string is refused, not split tiktoken's way.
    "cl100k": r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"
    r"\s*[\r\n]|\s+(?!\S)|\s",
}
"""Family name -> tiktoken's ``pat_str`` for it, where it is not the tokenizer.json form (``from_tiktoken``)."""

TIKTOKEN_ALIASES: Final[dict[str, str]] = {
    # r50k_base, p50k_base and gpt2's pat_str: GPT-2's pattern in tiktoken's spelling, the same
    # pieces on every text (the contractions grouped, possessive runs where nothing backtracks,
    # \s++$ taking the run \s+(?!\S) takes at the end, \s where \s+ could only match one).
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s": "gpt2",
}
"""tiktoken ``pat_str`` -> the family whose pieces it gives, where it is another spelling of its pattern."""

SEQUENCES: Final[dict[str, tuple[str, ...]]] = {
    # DeepSeek-V3 and R1: three Splits in turn, each on the pieces of the one before.
    "deepseek-v3": (
        r"\p{N}{1,3}",
        r"[一-龥぀-ゟ゠-ヿ]+",
        # As DeepSeek's file writes it: CR and LF as the characters themselves, not escapes.
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
        " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    ),
}
"""Family name -> the exact patterns of its Sequence of Isolated Splits, in order."""


class UnsupportedPatternError(ValueError):
    """A pattern string or family name that peek2 does not implement."""


# How each shape sees the table's classes (index: class id, value: category).
_SYMBOLS: Final = (CLASS_OTHER, CLASS_ASCII_PUNCT, CLASS_CJK_PUNCT, CLASS_CONTROL, CLASS_CJK_UNASSIGNED)
_FIXED: Final = {
    CLASS_NUMBER: scanner.CAT_NUMBER,
    CLASS_WHITESPACE: scanner.CAT_WHITESPACE,
    CLASS_SPACE: scanner.CAT_SPACE,
    CLASS_NEWLINE: scanner.CAT_NEWLINE,
    CLASS_SURROGATE: scanner.CAT_SURROGATE,
}


def _categories(shape: int, marks_are_letters: bool) -> bytes:
    """Class id -> category, for one shape."""
    table = bytearray(CLASS_COUNT)
    for cls, cat in _FIXED.items():
        table[cls] = cat
    table[CLASS_APOSTROPHE] = scanner.CAT_APOSTROPHE
    if shape == scanner.SHAPE_CLASSIC or shape == scanner.SHAPE_GPT2:
        for cls in LETTER_CLASSES:
            table[cls] = scanner.CAT_LETTER
        for cls in MARK_CLASSES:
            table[cls] = scanner.CAT_LETTER if marks_are_letters else scanner.CAT_OTHER
        for cls in _SYMBOLS:
            table[cls] = scanner.CAT_OTHER
    elif shape == scanner.SHAPE_CASED:
        for cls in (CLASS_LETTER, CLASS_CJK_LETTER):
            table[cls] = scanner.CAT_LETTER  # Lm, Lo: in both case sets
        table[CLASS_UPPER] = table[CLASS_ASCII_UPPER] = scanner.CAT_UPPER
        table[CLASS_LOWER] = table[CLASS_ASCII_LOWER] = scanner.CAT_LOWER
        for cls in MARK_CLASSES:
            table[cls] = scanner.CAT_MARK
        for cls in _SYMBOLS:
            table[cls] = scanner.CAT_OTHER
    else:
        for cls in (CLASS_LETTER, CLASS_UPPER, CLASS_LOWER):
            table[cls] = scanner.CAT_LETTER
        table[CLASS_ASCII_UPPER] = table[CLASS_ASCII_LOWER] = scanner.CAT_ASCII_LETTER
        table[CLASS_MARK] = scanner.CAT_MARK
        table[CLASS_OTHER] = scanner.CAT_OTHER
        table[CLASS_ASCII_PUNCT] = table[CLASS_APOSTROPHE] = scanner.CAT_ASCII_PUNCT
        table[CLASS_CONTROL] = scanner.CAT_CONTROL
        table[CLASS_CJK_LETTER] = scanner.CAT_LETTER | scanner.CJK_FLAG
        table[CLASS_CJK_MARK] = scanner.CAT_MARK | scanner.CJK_FLAG
        table[CLASS_CJK_PUNCT] = scanner.CAT_OTHER | scanner.CJK_FLAG
        table[CLASS_CJK_UNASSIGNED] = scanner.CAT_CONTROL | scanner.CJK_FLAG
    return bytes(table)


class Family:
    """What sets one family apart: its name, its patterns, and the switches of the scanner.

    ``rules`` packs the switches into the one integer the scanner takes; ``stage2`` is the
    class table translated to the categories of the family's shape.
    """

    def __init__(
        self,
        name: str,
        *,
        shape: int = scanner.SHAPE_CLASSIC,
        max_digits: int,
        marks_are_letters: bool = False,
        contraction_suffix: bool = False,
        slash_after_punct: bool = False,
        end_spaces: bool = False,
    ) -> None:
        self.name: Final = name
        # () for a family no regex stands for exactly (starcoder2: Rust's char::is_numeric).
        self.patterns: Final[tuple[str, ...]] = (
            SEQUENCES[name] if name in SEQUENCES
            else (TIKTOKEN_PATTERNS.get(name) or PATTERNS[name],) if name in PATTERNS or name in TIKTOKEN_PATTERNS
            else ()
        )
        self.pattern: Final = self.patterns[-1] if self.patterns else ""
        self.shape: Final = shape
        self.max_digits: Final = max_digits
        self.marks_are_letters: Final = marks_are_letters
        self.rules: Final[int] = (
            max_digits
            | (shape << scanner.SHAPE_SHIFT)
            | (scanner.RULE_CONTRACTION_SUFFIX if contraction_suffix else 0)
            | (scanner.RULE_SLASH_AFTER_PUNCT if slash_after_punct else 0)
            | (scanner.RULE_END_SPACES if end_spaces else 0)
        )
        self.stage2: Final[bytes] = STAGE2.translate(_categories(shape, marks_are_letters).ljust(256, b"\0"))

    def __repr__(self) -> str:
        return f"Family({self.name!r})"


FAMILIES: Final[dict[str, Family]] = {
    "llama3": Family("llama3", max_digits=3),
    "qwen2": Family("qwen2", max_digits=1),
    "qwen3.5": Family("qwen3.5", max_digits=1, marks_are_letters=True),
    "cl100k": Family("cl100k", max_digits=3, end_spaces=True),
    "o200k": Family("o200k", shape=scanner.SHAPE_CASED, max_digits=3, contraction_suffix=True, slash_after_punct=True),
    "tekken": Family("tekken", shape=scanner.SHAPE_CASED, max_digits=1, slash_after_punct=True),
    "deepseek-v3": Family("deepseek-v3", shape=scanner.SHAPE_DEEPSEEK, max_digits=3),
    "gpt2": Family("gpt2", shape=scanner.SHAPE_GPT2, max_digits=0),  # (0: no limit)
    # StarCoder2, SmolLM: Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)], GPT-2's
    # pattern between digits that are pieces of their own (1: digits apart, scanner._digits_apart_piece_end).
    "starcoder2": Family("starcoder2", shape=scanner.SHAPE_GPT2, max_digits=1),
}

_BY_PATTERN: Final[dict[str, Family]] = {family.pattern: family for family in FAMILIES.values() if family.name in PATTERNS}
# tiktoken's pat_str of each family, for from_tiktoken: its own where it differs, else the same string.
_BY_TIKTOKEN_PATTERN: Final[dict[str, Family]] = {
    **_BY_PATTERN,
    **{pattern: FAMILIES[name] for name, pattern in TIKTOKEN_PATTERNS.items()},
    **{pattern: FAMILIES[name] for pattern, name in TIKTOKEN_ALIASES.items()},
}
_BY_TIKTOKEN_ONLY: Final[dict[str, Family]] = {pattern: FAMILIES[name] for name, pattern in TIKTOKEN_PATTERNS.items()}
_BY_SEQUENCE: Final[dict[tuple[str, ...], Family]] = {family.patterns: family for family in FAMILIES.values() if family.patterns}
# tiktoken's encoding names, which a user of tiktoken passes first (``tiktoken.get_encoding``).
TIKTOKEN_ENCODINGS: Final[dict[str, str]] = {
    "cl100k_base": "cl100k",
    "o200k_base": "o200k",
    "o200k_harmony": "o200k",
    "r50k_base": "gpt2",
    "p50k_base": "gpt2",
    "p50k_edit": "gpt2",
}


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
    if pattern_or_name in TIKTOKEN_ENCODINGS:  # (refused as unknown, the family it means unsaid)
        family_name = TIKTOKEN_ENCODINGS[pattern_or_name]
        raise UnsupportedPatternError(
            f"{pattern_or_name!r} is a tiktoken encoding, not a pattern family: its pattern is the family "
            f"{family_name!r} (pass that name; Tokenizer.from_tiktoken takes the encoding's name too)"
        )
    if len(pattern_or_name) < 16 and "\\" not in pattern_or_name:
        raise UnsupportedPatternError(f"unknown pattern family {pattern_or_name!r}; supported families: {names}")
    tiktoken = _BY_TIKTOKEN_ONLY.get(pattern_or_name)
    if tiktoken is not None:  # (refused with a message that listed cl100k among the patterns; a bug hunt)
        raise UnsupportedPatternError(
            f"{_clip(pattern_or_name)} is tiktoken's pat_str of {tiktoken.name!r}, which tokenizers' regex "
            f"(Oniguruma) reads otherwise (\\p{{N}}{{1,3}}+ as all the digits of a number): for tiktoken's pieces "
            f"pass the family name {tiktoken.name!r}, or load a rank file with Tokenizer.from_tiktoken"
        )
    raise UnsupportedPatternError(
        f"unsupported pre-tokenizer pattern {_clip(pattern_or_name)}: peek2 implements only the exact "
        f"pattern strings of peek2.PATTERNS ({', '.join(PATTERNS)}), and the families {names} by name; "
        f"{_nearest_difference(pattern_or_name)}"
    )


def find_tiktoken_family(pattern_or_name: str) -> Family:
    """The family named ``pattern_or_name`` (a family's name or a tiktoken encoding's), or whose
    ``pat_str`` it is in tiktoken's semantics.

    >>> find_tiktoken_family(TIKTOKEN_PATTERNS["cl100k"]).name
    'cl100k'
    >>> find_tiktoken_family("o200k_harmony").name
    'o200k'
    """
    if isinstance(pattern_or_name, str) and pattern_or_name in TIKTOKEN_ENCODINGS:
        return FAMILIES[TIKTOKEN_ENCODINGS[pattern_or_name]]
    family = _BY_TIKTOKEN_PATTERN.get(pattern_or_name) if isinstance(pattern_or_name, str) else None
    if family is not None:
        return family
    try:
        return find_family(pattern_or_name)
    except UnsupportedPatternError as error:  # (the names this also takes, which the message left out; a bug hunt)
        raise UnsupportedPatternError(f"{error}; or a tiktoken encoding: {', '.join(TIKTOKEN_ENCODINGS)}") from None


def find_sequence(patterns: tuple[str, ...]) -> Family:
    """The family whose pre-tokenizer is exactly this sequence of Isolated Split patterns.

    >>> find_sequence(SEQUENCES["deepseek-v3"]).name
    'deepseek-v3'

    Raises:
        UnsupportedPatternError: no family is that sequence (the message says where it differs).
    """
    if len(patterns) == 1:
        return find_family(patterns[0])
    family = _BY_SEQUENCE.get(patterns)
    if family is not None:
        return family
    for name, known in SEQUENCES.items():
        if len(known) == len(patterns):
            k = next(k for k in range(len(known)) if known[k] != patterns[k])
            raise UnsupportedPatternError(
                f"unsupported sequence of {len(patterns)} Split patterns: split {k} is {_clip(patterns[k])}, "
                f"where the {name!r} family has {_clip(known[k])}"
            )
    supported = ", ".join(f"{name} ({len(known)} splits)" for name, known in SEQUENCES.items())
    raise UnsupportedPatternError(
        f"unsupported sequence of {len(patterns)} Split patterns: peek2 implements one Split of a family "
        f"pattern (see peek2.PATTERNS) or the sequences of {supported}"
    )
