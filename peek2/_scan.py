"""The Peek2 scanner: split text into pieces exactly like the family's regex, without a regex.

Compiled with mypyc; keep to primitive types (``str``, ``bytes``, ``i64``), direct
calls and ``Final`` constants; see "Performance notes" below.

How it works (the Peek2 paper, ../shared/seeds/004_*): every scalar has a
category (``peek2/_tables.py`` gives its class; a family maps classes to
categories through its own ``stage2`` table). The categories of the next two
scalars pick one of five branches, each mirroring the regex alternatives:

    BR_CONTRACTION  (?i:'s|'t|'re|'ve|'m|'ll|'d)   apostrophe + letter; on failure
                    falls back to BR_WORD with the apostrophe as prefix ("late fallback")
    BR_WORD         [^\\r\\n\\p{L}\\p{N}]?\\p{L}+      a letter, or one prefix scalar + a letter
    BR_NUMBER       \\p{N}{1,max_digits}
    BR_PUNCT         ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*
    BR_SPACE        \\s*[\\r\\n]+ | \\s+(?!\\S) | \\s+

Each branch returns the end of its piece; no branch looks back, and each scalar is
read at most twice (a whitespace run that ends in a newline is read once to find
its last newline and once more by the following piece), so the scan is linear.

Invariants the branches rely on (checked against the reference for every scalar
by tests/test_codepoints.py):
- the branch depends only on (category of text[i], category of text[i+1]);
- the contraction branch can only match when text[i+1] is a letter (s t m d r v l
  and U+017F LATIN SMALL LETTER LONG S, which Oniguruma case-folds to "s");
- no piece contains a surrogate: the surrogate category belongs to no run, so a
  surrogate always starts a piece, and that piece raises ValueError.

Performance notes (measured with scripts/bench_pretokenize.py, compiled, 2 cores):
- Categories come from two ``bytes`` lookups per scalar (``STAGE1`` then the family's
  ``stage2``); ``ord(text[i])`` builds no str object under mypyc >= 1.20.
- Dispatch is a ``bytes`` table of branch ids and an if-chain of direct calls, not a
  list of functions: mypyc calls a stored function generically (slow), a named
  module function through a C call.
- The run loops are written out in each branch instead of calling a per-scalar
  helper: that keeps the per-scalar cost to the two lookups and a compare.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

from peek2._tables import (
    CLASS_APOSTROPHE,
    CLASS_COUNT,
    CLASS_LETTER,
    CLASS_NEWLINE,
    CLASS_NUMBER,
    CLASS_OTHER,
    CLASS_SPACE,
    CLASS_SURROGATE,
    CLASS_WHITESPACE,
    MASK,
    SHIFT,
    STAGE1,
)

# A family's categories are the table's classes with CLASS_MARK mapped to either
# CLASS_OTHER or CLASS_LETTER, plus CAT_END for "past the end of the text".
CAT_END: Final = CLASS_COUNT
CAT_STRIDE: Final = CLASS_COUNT + 1

BR_CONTRACTION: Final = 0
BR_WORD: Final = 1
BR_NUMBER: Final = 2
BR_PUNCT: Final = 3
BR_SPACE: Final = 4
BR_INVALID: Final = 5

CP_APOSTROPHE: Final = 0x27
CP_LONG_S: Final = 0x17F  # case-folds to "s" in Oniguruma, so "'\u017f" is a contraction


def _branch_of(c0: int, c1: int) -> int:
    """The branch for a piece whose first two scalars have categories c0, c1 (builds DISPATCH)."""
    if c0 == CLASS_SURROGATE or c0 == CAT_END:
        return BR_INVALID
    if c0 == CLASS_LETTER:
        return BR_WORD
    if c0 == CLASS_NUMBER:
        return BR_NUMBER
    if c1 == CLASS_LETTER:
        if c0 == CLASS_APOSTROPHE:
            return BR_CONTRACTION
        if c0 != CLASS_NEWLINE:
            return BR_WORD  # any non-CR/LF, non-letter, non-number scalar prefixes a word
    if c0 == CLASS_OTHER or c0 == CLASS_APOSTROPHE:
        return BR_PUNCT
    if c0 == CLASS_SPACE and (c1 == CLASS_OTHER or c1 == CLASS_APOSTROPHE):
        return BR_PUNCT  # " ?" of the punctuation alternative takes only U+0020
    return BR_SPACE


DISPATCH: Final = bytes([_branch_of(c0, c1) for c0 in range(CAT_STRIDE) for c1 in range(CAT_STRIDE)])


def _category(cp: i64, stage2: bytes) -> i64:
    """The family category of scalar cp (ASCII skips the first stage: its block is block 0)."""
    if cp < 128:
        return stage2[cp]
    block: i64 = STAGE1[cp >> SHIFT]
    return stage2[(block << SHIFT) | (cp & MASK)]


def _contraction_end(text: str, i: i64, n: i64) -> i64:
    """End of the contraction starting with the apostrophe at i, or -1 if none matches."""
    c = ord(text[i + 1])  # the caller saw a letter at i + 1
    if c == 0x73 or c == 0x53 or c == 0x74 or c == 0x54 or c == 0x6D or c == 0x4D:  # s S t T m M
        return i + 2
    if c == 0x64 or c == 0x44 or c == CP_LONG_S:  # d D, and long s
        return i + 2
    if i + 2 >= n:
        return -1
    c2 = ord(text[i + 2])
    if (c == 0x72 or c == 0x52 or c == 0x76 or c == 0x56) and (c2 == 0x65 or c2 == 0x45):  # [rv]e
        return i + 3
    if (c == 0x6C or c == 0x4C) and (c2 == 0x6C or c2 == 0x4C):  # ll
        return i + 3
    return -1


def _letters_end(text: str, j: i64, n: i64, stage2: bytes) -> i64:
    """End of the run of letters starting at j."""
    while j < n:
        cp: i64 = ord(text[j])
        # The lookup is written out (not _category) in this, the hottest loop: see Performance notes.
        if cp < 128:
            c: i64 = stage2[cp]
        else:
            block: i64 = STAGE1[cp >> SHIFT]
            c = stage2[(block << SHIFT) | (cp & MASK)]
        if c != CLASS_LETTER:
            break
        j += 1
    return j


def _number_end(text: str, j: i64, n: i64, stage2: bytes, max_digits: i64) -> i64:
    """End of at most max_digits numbers starting at j (a number is known to be at j)."""
    limit = j + max_digits
    if limit > n:
        limit = n
    j += 1
    while j < limit:
        cp: i64 = ord(text[j])
        if _category(cp, stage2) != CLASS_NUMBER:
            break
        j += 1
    return j


def _punct_end(text: str, j: i64, n: i64, stage2: bytes) -> i64:
    """End of ``[^\\s\\p{L}\\p{N}]+[\\r\\n]*`` starting at j (a punctuation scalar is at j)."""
    j += 1
    while j < n:
        cp: i64 = ord(text[j])
        c = _category(cp, stage2)
        if c != CLASS_OTHER and c != CLASS_APOSTROPHE:
            break
        j += 1
    while j < n:
        cp = ord(text[j])
        if cp != 0x0A and cp != 0x0D:
            break
        j += 1
    return j


def _space_end(text: str, i: i64, n: i64, stage2: bytes) -> i64:
    """End of the whitespace piece at i: ``\\s*[\\r\\n]+``, else ``\\s+(?!\\S)``, else ``\\s+``."""
    j = i
    last_newline: i64 = -1
    while j < n:
        cp: i64 = ord(text[j])
        c = _category(cp, stage2)
        if c == CLASS_NEWLINE:
            last_newline = j
        elif c != CLASS_SPACE and c != CLASS_WHITESPACE:
            break
        j += 1
    if last_newline >= 0:
        return last_newline + 1  # \s* backtracks to the last CR/LF of the run
    if j == n or j - i == 1:
        return j  # the run reaches the end, or a lone whitespace before \S
    return j - 1  # leave the last whitespace to prefix what follows


def _invalid(text: str, i: i64) -> ValueError:
    cp = ord(text[i])
    return ValueError(
        f"lone surrogate U+{cp:04X} at index {i}: the text is not valid Unicode "
        "(tokenizers refuses it too); decode bytes with errors='replace' or remove it"
    )


def first_surrogate(text: str, start: i64 = 0) -> i64:
    """The index of the first lone surrogate in ``text[start:]``, or -1."""
    n: i64 = len(text)
    i: i64 = start
    while i < n:
        cp: i64 = ord(text[i])
        if 0xD800 <= cp <= 0xDFFF:
            return i
        i += 1
    return -1


def surrogate_error(text: str, error: ValueError) -> ValueError:
    """``error`` (a lone surrogate met in a part of ``text``) with the index in ``text`` itself.

    The scanner raises with the index in what it was given: a segment between added tokens, a
    normalized text, a streaming encoder's pending text. The callers that know the whole text
    re-raise with this (an error path: the scan costs nothing otherwise).
    """
    i = first_surrogate(text)
    return _invalid(text, i) if i >= 0 else error


def piece_end(text: str, i: i64, n: i64, stage2: bytes, max_digits: i64) -> i64:
    """End of the piece starting at i (0 <= i < n); raises ValueError at a lone surrogate."""
    cp: i64 = ord(text[i])
    c0: i64 = _category(cp, stage2)
    c1: i64 = CAT_END
    if i + 1 < n:
        cp = ord(text[i + 1])
        c1 = _category(cp, stage2)
    branch = DISPATCH[c0 * CAT_STRIDE + c1]
    if branch == BR_WORD:
        # A letter at i, or a prefix at i and a letter at i + 1: the run goes on from i + 2
        # only when i + 1 is a letter, which c1 already tells.
        if c1 == CLASS_LETTER:
            return _letters_end(text, i + 2, n, stage2)
        return i + 1
    if branch == BR_PUNCT:
        if c0 == CLASS_SPACE:
            return _punct_end(text, i + 1, n, stage2)
        return _punct_end(text, i, n, stage2)
    if branch == BR_SPACE:
        return _space_end(text, i, n, stage2)
    if branch == BR_NUMBER:
        return _number_end(text, i, n, stage2, max_digits)
    if branch == BR_CONTRACTION:
        end = _contraction_end(text, i, n)
        if end >= 0:
            return end
        return _letters_end(text, i + 2, n, stage2)  # late fallback: "'" prefixes the word
    raise _invalid(text, i)


def split_pieces(text: str, stage2: bytes, max_digits: i64) -> list[str]:
    """The pieces of text, in order."""
    out: list[str] = []
    n: i64 = len(text)
    i: i64 = 0
    while i < n:
        end = piece_end(text, i, n, stage2, max_digits)
        out.append(text[i:end])
        i = end
    return out


def split_offsets(text: str, stage2: bytes, max_digits: i64) -> list[tuple[int, int]]:
    """The (start, end) character offsets of the pieces of text, in order."""
    out: list[tuple[int, int]] = []
    n: i64 = len(text)
    i: i64 = 0
    while i < n:
        end = piece_end(text, i, n, stage2, max_digits)
        out.append((i, end))
        i = end
    return out


def split_ends(text: str, stage2: bytes, max_digits: i64) -> list[int]:
    """The end offset of each piece: the compact form for engines built on the scanner."""
    out: list[int] = []
    n: i64 = len(text)
    i: i64 = 0
    while i < n:
        i = piece_end(text, i, n, stage2, max_digits)
        out.append(i)
    return out


def final_boundary(text: str, stage2: bytes, one_digit: bool, window: i64) -> i64:
    """The last ``c`` among the final ``window`` characters where a piece ends whatever follows.

    Rule 1 of ``peek2.streaming`` (see its notes): the categories of ``text[c - 1]`` and
    ``text[c]`` alone force a boundary at ``c``: a letter then a non-letter, a number then a
    non-number (or any two numbers when pieces take one), a non-whitespace character then a
    whitespace other than CR/LF. Returns 0 if there is none. Compiled because the streaming
    encoder asks once per chunk.
    """
    n: i64 = len(text)
    if n < 2:
        return 0
    after = _category(ord(text[n - 1]), stage2)
    stop: i64 = max(0, n - window)
    c: i64 = n - 1
    while c > stop:
        before = _category(ord(text[c - 1]), stage2)
        if before == CLASS_LETTER:
            if after != CLASS_LETTER:
                return c
        elif before == CLASS_NUMBER:
            if after != CLASS_NUMBER or one_digit:
                return c
        elif (
            (after == CLASS_WHITESPACE or after == CLASS_SPACE)
            and before != CLASS_WHITESPACE
            and before != CLASS_SPACE
            and before != CLASS_NEWLINE
            and before != CLASS_SURROGATE
        ):
            return c
        after = before
        c -= 1
    return 0
