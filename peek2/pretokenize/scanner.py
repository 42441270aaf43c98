"""The Peek2 scanner: split text into pieces exactly like the family's regex, without a regex.

Compiled with mypyc; keep to primitive types (``str``, ``bytes``, ``i64``), direct
calls and ``Final`` constants; see "Performance notes" below.

How it works (the Peek2 paper, ../shared/seeds/004_*): every scalar has a
category (``peek2/pretokenize/tables.py`` gives its class; a family maps classes to
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
  helper: that keeps the per-scalar cost to the two lookups and a compare. ``_letters_end``
  and ``_run_end`` therefore hold the same lookup twice, on purpose: ``_letters_end`` as a call
  of ``_run_end`` with one category three times scanned 5-7% slower for llama3 and qwen (English
  210 -> 198, XNLI 285 -> 266, code 190 -> 178 MB/s, ``piece_count``, medians of 9, both builds
  run twice).
- The cased shape (o200k, tekken) had kept ``_category`` calls in its word loop, its
  lowercase run (``_run_end``) and its first two lookups: written out too, the scan of
  English with o200k went from 140 to 176 MB/s (``piece_count``, best of 7; classic llama3's:
  210), and o200k_base encode against tiktoken's from 1.81x to 2.05x on English and 1.72x to
  1.96x on XNLI (``python scripts/bench_families.py --runs 5``).
- The cased shape's lowercase run (``_lower_run_end``) takes a-z without reading the table and
  ends at any other ASCII scalar; past ASCII it is ``_run_end``'s. English with o200k_base,
  encode with the piece cache emptied, instructions (callgrind, 300K characters): 53.7M ->
  51.3M (a first form, a copy of ``_run_end``'s loop with the a-z test in front, gave 53.0M, and
  26.9 -> 25.2 ms a megabyte, fastest of 8 alternated processes of each build; an ASCII range
  argument of ``_run_end`` gave 54.0M).
- The encode loop (``peek2.bpe.merger``) reads the pieces of an ASCII stretch of text from its
  bytes (``ascii_piece_end`` then, ``latin1_piece_end`` now: words, numbers and punctuation of the classic and cased shapes; a
  whitespace piece, and a piece that reaches the end of the bytes before the end of the text, is
  ``piece_end``'s). ``ord(text[j])`` works out the str's kind and data pointer at each scalar: a
  loop over a-z in a compiled test ran at 1,170 MB/s over a str and 2,730 over its bytes, and a
  loop of letter runs 367 and 523. Encode with the piece cache emptied, CPU medians of 7 in a
  process, processes of the two builds alternated: Llama-3.1 English 86.5-90.8 -> 98.7-104.8
  MB/s with words alone, code 80.9-83.5 -> 85.6-86.0; o200k_base English 79.7-83.6 -> 90.9-99.2.
  Words alone made a piece of digits or punctuation read twice (its first two scalars here, then
  the scanner): 300K characters of random digits 6-17% slower, a JSON record repeated 8-9%.
  With numbers and punctuation read here too, against the build before any of it: JSON 3.34-3.42
  -> 2.47-2.56 ms, random digits (Llama-3.1) 5.35-5.54 -> 4.51-4.61 ms, random punctuation
  11.1-11.5 -> 10.6-11.0 ms, English (a busier hour) 77-83 -> 92-97 MB/s; GPT-2's pattern
  (``_ascii_gpt2_piece_end``) English 82.5-88.3 -> 90.5-100.8, JSON 101-103 -> 124-127, code
  78-79 -> 78-83 MB/s (medians of 9, three processes of each build). XNLI and the sentences
  are unchanged (their texts are rarely ASCII). In ``scripts/bench_encode.py`` and
  ``bench_families.py``, whose engines take turns (each run finds peek2's tables out of the CPU
  caches: English there 58-65 MB/s, against 90-105 here), the gain was within the runs' spread;
  o200k English against tiktoken 0.14 alone, taking turns with it (7 rounds): 65.7 -> 74.0
  MB/s, 1.88x -> 2.10x.
- The same loops read windows of Latin-1 text (every scalar below U+0100 but U+00AA and U+00BA,
  the Lo letters that the cased shape puts in both of its classes), with the family's categories
  of the 256 scalars (``latin1_stage``): French, German and Spanish text was read scalar by
  scalar for want of one accented letter, at about half the speed of English when the pieces are
  cached (o200k, 100 KB of XNLI German, encode with a warm cache 1.16 -> 0.75 ms). Encode with the
  piece cache emptied, CPU medians of 9 in a process, processes of the two builds alternated three
  times (o200k_base): 200 KB of XNLI German 38.2-42.1 -> 46.5-50.2 MB/s, French 38.8-43.6 ->
  44.9-48.5 (a French window often holds a curly apostrophe, U+2019, and is read as before),
  Spanish 42.1-44.9 -> 47.5-52.1; English, code, XNLI (its windows hold every script) and the
  sentences one by one (their new pieces' merges are most of their cost) unchanged within the
  runs' spread. A text of another script is turned down by a few scalars read across the window
  before any slice (Russian sentences one by one unchanged). DeepSeek-V3's shape, which read
  every piece through ``ord(text[j])``, reads its words, numbers and punctuation from the same
  bytes (``_latin1_deepseek_piece_end``; no Latin-1 scalar is in its CJK ranges): the same A/B,
  English 60.1-71.5 -> 72.0-82.8 MB/s, code 56.8-63.5 -> 67.6-72.2, the European text
  40.3-41.3 -> 44.2-48.5; XNLI, Chinese and the sentences one by one within the spread.
- DeepSeek-V3's word loop goes through ``_run_end`` too (the segment's kind in its three
  categories): ``piece_count`` of English 6.02 -> 5.88 ms (best of 7 in a process, two processes
  of each build alternated). A loop of its own gave 5.34 ms, but wrote the lookup out a fourth
  time; one loop for the same logic was preferred over that 0.5 ms (about 3% of the encode).
"""

from __future__ import annotations

from typing import Any, Final

from mypy_extensions import i64

from peek2.pretokenize.tables import MASK, SHIFT, STAGE1

# Categories: what the scanner sees. A family maps every class of peek2/pretokenize/tables.py to one
# of these (peek2/pretokenize/pattern.py), so that each shape reads only the distinctions its
# pattern makes. The first nine are the classes of the same number.
CAT_OTHER: Final = 0  # anything no other category of the family claims
CAT_LETTER: Final = 1  # llama3/qwen: \p{L}; cased: \p{Lm}\p{Lo} (both case sets); deepseek: non-ASCII \p{L}
CAT_NUMBER: Final = 2
CAT_MARK: Final = 3  # cased and deepseek only: \p{M}
CAT_WHITESPACE: Final = 4
CAT_SPACE: Final = 5
CAT_NEWLINE: Final = 6
CAT_APOSTROPHE: Final = 7
CAT_SURROGATE: Final = 8
CAT_UPPER: Final = 9  # cased: \p{Lu}\p{Lt}
CAT_LOWER: Final = 10  # cased: \p{Ll}
CAT_ASCII_LETTER: Final = 11  # deepseek: [A-Za-z]
CAT_ASCII_PUNCT: Final = 12  # deepseek: ASCII punctuation and symbols, the apostrophe included
CAT_CONTROL: Final = 13  # deepseek: \p{C} that is not \s, which no alternative matches
CAT_END: Final = 14  # past the end of the text (or, for deepseek, of the pre-split segment)
CAT_STRIDE: Final = 15
CJK_FLAG: Final = 16  # deepseek: added to the category of a scalar of its pre-split CJK ranges

# A family's rules, one integer (see peek2.pretokenize.families.Family.rules): the digit limit in the low
# bits, the shape above it, and two switches of the cased shape.
RULE_DIGITS: Final = 0xF
SHAPE_SHIFT: Final = 4
SHAPE_MASK: Final = 0xF
SHAPE_CLASSIC: Final = 0  # llama3, qwen2, qwen3.5: (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|...
SHAPE_CASED: Final = 1  # o200k, tekken: words split at case changes
SHAPE_DEEPSEEK: Final = 2  # deepseek-v3: digits, then CJK runs, then its main pattern
SHAPE_GPT2: Final = 3  # gpt2 (r50k, p50k, RoBERTa...): 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
RULE_CONTRACTION_SUFFIX: Final = 1 << 8  # cased: a word takes (?i:'s|'t|'re|'ve|'m|'ll|'d)?
RULE_SLASH_AFTER_PUNCT: Final = 1 << 9  # punctuation ends with [\r\n/]* instead of [\r\n]*
RULE_END_SPACES: Final = 1 << 10  # tiktoken's cl100k: \s++$ first, a whitespace run at the end is one piece

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
    if c0 == CAT_SURROGATE or c0 == CAT_END:
        return BR_INVALID
    if c0 == CAT_LETTER:
        return BR_WORD
    if c0 == CAT_NUMBER:
        return BR_NUMBER
    if c1 == CAT_LETTER:
        if c0 == CAT_APOSTROPHE:
            return BR_CONTRACTION
        if c0 != CAT_NEWLINE:
            return BR_WORD  # any non-CR/LF, non-letter, non-number scalar prefixes a word
    if c0 == CAT_OTHER or c0 == CAT_APOSTROPHE:
        return BR_PUNCT
    if c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_APOSTROPHE):
        return BR_PUNCT  # " ?" of the punctuation alternative takes only U+0020
    return BR_SPACE


DISPATCH: Final = bytes([_branch_of(c0, c1) for c0 in range(CAT_STRIDE) for c1 in range(CAT_STRIDE)])


def _category(cp: i64, stage2: bytes) -> i64:
    """The family category of scalar cp (ASCII skips the first stage: its block is block 0)."""
    if cp < 128:
        return stage2[cp]
    block: i64 = STAGE1[cp >> SHIFT]
    return stage2[(block << SHIFT) | (cp & MASK)]


def category(cp: i64, stage2: bytes) -> i64:
    """The family category of scalar ``cp`` (``stage2``: the family's table), for code outside the scanner."""
    return _category(cp, stage2)


def first_of_each_category(stage2: bytes, seen: set[int]) -> list[str]:
    """The first scalar from U+0080 up of each category not in ``seen`` (added to it), in code
    point order. A block of the first stage already read is skipped: its scalars have the
    classes of the earlier block of the same entry (the 1.1M calls of ``category`` took 12-17 ms
    of a tokenizer's first stream; a few thousand blocks are read)."""
    found: list[str] = []
    blocks_read: set[int] = set()
    for index in range(0x80 >> SHIFT, 0x110000 >> SHIFT):
        first: i64 = index << SHIFT
        if 0xD800 <= first < 0xE000:
            continue  # (surrogates, not scalars: blocks of 128 do not straddle the range)
        block: i64 = STAGE1[index]
        if block in blocks_read:
            continue
        blocks_read.add(block)
        for cp in range(first, first + (1 << SHIFT)):
            kind: i64 = stage2[(block << SHIFT) | (cp & MASK)]
            if kind not in seen:
                seen.add(kind)
                found.append(chr(cp))
    return found


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
        if c != CAT_LETTER:
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
        if _category(cp, stage2) != CAT_NUMBER:
            break
        j += 1
    return j


def _run_end(text: str, j: i64, n: i64, stage2: bytes, a: i64, b: i64, c: i64) -> i64:
    """End of the run from j of scalars whose category is a, b or c."""
    while j < n:
        cp: i64 = ord(text[j])
        # Written out, as in _letters_end: the cased shape's punctuation runs go through here.
        if cp < 128:
            k: i64 = stage2[cp]
        else:
            block: i64 = STAGE1[cp >> SHIFT]
            k = stage2[(block << SHIFT) | (cp & MASK)]
        if k != a and k != b and k != c:
            break
        j += 1
    return j


def _punct_end(text: str, j: i64, n: i64, stage2: bytes) -> i64:
    """End of ``[^\\s\\p{L}\\p{N}]+[\\r\\n]*`` starting at j (a punctuation scalar is at j)."""
    j += 1
    while j < n:
        cp: i64 = ord(text[j])
        c = _category(cp, stage2)
        if c != CAT_OTHER and c != CAT_APOSTROPHE:
            break
        j += 1
    while j < n:
        cp = ord(text[j])
        if cp != 0x0A and cp != 0x0D:
            break
        j += 1
    return j


def _space_end(text: str, i: i64, n: i64, stage2: bytes, rules: i64) -> i64:
    """End of the whitespace piece at i: ``\\s*[\\r\\n]+``, else ``\\s+(?!\\S)``, else ``\\s+``.

    For deepseek the end of a pre-split segment is an end of text; with RULE_END_SPACES (tiktoken's
    cl100k, ``\\s++$`` first) a run that reaches the end of the text is one piece.
    """
    j = i
    last_newline: i64 = -1
    while j < n:
        cp: i64 = ord(text[j])
        c = _category(cp, stage2)
        if c == CAT_NEWLINE:
            last_newline = j
        elif c != CAT_SPACE and c != CAT_WHITESPACE:
            break
        j += 1
    at_end = j == n or (
        ((rules >> SHAPE_SHIFT) & SHAPE_MASK) == SHAPE_DEEPSEEK and _deepseek_category(ord(text[j]), stage2, 0) == CAT_END
    )
    if at_end and (rules & RULE_END_SPACES) != 0:
        return j
    if last_newline >= 0:
        return last_newline + 1  # \s* backtracks to the last CR/LF of the run
    if at_end or j - i == 1:
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


def piece_end(text: str, i: i64, n: i64, stage2: bytes, rules: i64) -> i64:
    """End of the piece starting at i (0 <= i < n); raises ValueError at a lone surrogate."""
    shape = (rules >> SHAPE_SHIFT) & SHAPE_MASK
    if shape == SHAPE_CLASSIC:
        return _classic_piece_end(text, i, n, stage2, rules)
    if shape == SHAPE_CASED:
        return _cased_piece_end(text, i, n, stage2, rules)
    if shape == SHAPE_GPT2:
        if (rules & RULE_DIGITS) == 1:
            return _digits_apart_piece_end(text, i, n, stage2)
        return _gpt2_piece_end(text, i, n, stage2)
    return _deepseek_piece_end(text, i, n, stage2)


def latin1_stage(stage2: bytes) -> bytes:
    """The family categories of U+0000..U+00FF, indexed by the scalar (``latin1_piece_end``'s table)."""
    return bytes([_category(cp, stage2) for cp in range(256)])


def reads_latin1_pieces(rules: i64) -> bool:
    """Whether ``latin1_piece_end`` knows the pieces of this family's shape (classic, cased,
    DeepSeek-V3's, and GPT-2's without its digits apart)."""
    shape = (rules >> SHAPE_SHIFT) & SHAPE_MASK
    return shape != SHAPE_GPT2 or (rules & RULE_DIGITS) != 1


def latin1_piece_end(text: str, data: bytes, offset: i64, i: i64, n: i64, stage: bytes, rules: i64) -> i64:
    """``piece_end(text, i, n, stage2, rules)`` for a word, a number or a punctuation piece of the
    classic, the cased, GPT-2's or DeepSeek-V3's shape, read from ``data``, the Latin-1 bytes of
    ``text[offset:offset + len(data)]`` (``offset <= i``; the encode loop's ``_latin1_window``), with
    ``stage = latin1_stage(stage2)``; -1 for a whitespace piece, or when the end is not known from
    ``data`` alone (the piece reaches the end of ``data`` before the end of the text: a letter,
    a digit or a mark may follow).

    Those are most pieces of English, code and JSON, and of French, German or Spanish text, and
    reading bytes costs less than ``ord(text[j])``, which finds the str's kind and data again at
    each scalar (see the performance notes). Below U+0100 the cased shape's letters are Ll and
    Lu only once U+00AA and U+00BA (Lo, in both of its classes) are left out, as
    ``_latin1_window`` does, the classic shape's are CAT_LETTER, and no scalar is a mark:
    tests/test_codepoints.py checks every scalar's category, and tests/test_scanner_latin1.py this
    function against ``piece_end`` at every position of random texts cut anywhere.
    """
    shape = (rules >> SHAPE_SHIFT) & SHAPE_MASK
    if not reads_latin1_pieces(rules):
        return -1
    size: i64 = len(data)
    at: i64 = i - offset
    whole = offset + size == n  # (data reaches the end of the text)
    c0: i64 = stage[data[at]]
    c1: i64 = CAT_END
    if at + 1 < size:
        c1 = stage[data[at + 1]]
    elif not whole:
        return -1
    if shape == SHAPE_GPT2:
        return _latin1_gpt2_piece_end(data, offset, at, size, whole, stage, c0, c1)
    if c0 == CAT_NUMBER:  # \p{N}{1,digits}, in the three shapes (DeepSeek-V3's split: 3 digits)
        limit = at + (rules & RULE_DIGITS)
        j = at + 1
        while j < size and j < limit and stage[data[j]] == CAT_NUMBER:
            j += 1
        if j == size and j < limit and not whole:
            return -1
        return offset + j
    if shape == SHAPE_DEEPSEEK:
        return _latin1_deepseek_piece_end(data, offset, at, size, whole, stage, c0, c1)
    slash = False
    if shape == SHAPE_CLASSIC:
        branch = DISPATCH[c0 * CAT_STRIDE + c1]
        if branch == BR_PUNCT:
            return _latin1_punct_end(data, offset, at + 1, size, whole, stage, False)
        if branch != BR_WORD:
            return -1
        if c1 != CAT_LETTER:
            return i + 1
        j = at + 2
        while j < size and stage[data[j]] == CAT_LETTER:
            j += 1
        if j == size and not whole:
            return -1
        return offset + j
    p = at
    if c0 != CAT_LOWER and c0 != CAT_UPPER:
        if not (c1 == CAT_LOWER or c1 == CAT_UPPER) or not (
            c0 == CAT_OTHER or c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_APOSTROPHE
        ):
            if c0 == CAT_OTHER or c0 == CAT_APOSTROPHE or (c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_APOSTROPHE)):
                slash = (rules & RULE_SLASH_AFTER_PUNCT) != 0
                return _latin1_punct_end(data, offset, at + 1, size, whole, stage, slash)
            return -1
        p = at + 1
    # X*Y+ or X+Y*: in ASCII X is A-Z and Y is a-z, and no scalar is in both.
    q = p
    while q < size and stage[data[q]] == CAT_UPPER:
        q += 1
    if q < size and stage[data[q]] == CAT_LOWER:
        q += 1
        while q < size and stage[data[q]] == CAT_LOWER:
            q += 1
    if q == size and not whole:
        return -1
    end = offset + q
    if (rules & RULE_CONTRACTION_SUFFIX) != 0 and end + 1 < n and ord(text[end]) == CP_APOSTROPHE:
        suffix = _contraction_end(text, end, n)
        if suffix >= 0:
            return suffix
    return end


def _latin1_gpt2_piece_end(data: bytes, offset: i64, at: i64, size: i64, whole: bool, stage: bytes, c0: i64, c1: i64) -> i64:
    """``latin1_piece_end`` of GPT-2's pattern (``_gpt2_piece_end``): a lowercase contraction, or a
    run of letters, of numbers or of punctuation after an optional U+0020; -1 for whitespace."""
    if data[at] == CP_APOSTROPHE and c1 == CAT_LETTER:
        c = data[at + 1]
        if c == 0x73 or c == 0x74 or c == 0x6D or c == 0x64:  # s t m d
            return offset + at + 2
        if at + 2 < size:
            c2 = data[at + 2]
            if (c == 0x72 or c == 0x76) and c2 == 0x65 or c == 0x6C and c2 == 0x6C:  # re ve ll
                return offset + at + 3
        elif not whole:
            return -1
    j = at
    if c0 == CAT_SPACE and (c1 == CAT_LETTER or c1 == CAT_NUMBER or c1 == CAT_OTHER or c1 == CAT_APOSTROPHE):
        j = at + 1  # the " ?" of the next three alternatives
        c0 = c1
    if c0 == CAT_OTHER or c0 == CAT_APOSTROPHE:
        first: i64 = CAT_OTHER
        second: i64 = CAT_APOSTROPHE
    elif c0 == CAT_LETTER or c0 == CAT_NUMBER:
        first = second = c0
    else:
        return -1
    j += 1
    while j < size:
        c = stage[data[j]]
        if c != first and c != second:
            break
        j += 1
    if j == size and not whole:
        return -1
    return offset + j


def _latin1_deepseek_piece_end(data: bytes, offset: i64, at: i64, size: i64, whole: bool, stage: bytes, c0: i64, c1: i64) -> i64:
    """``latin1_piece_end`` of DeepSeek-V3's splits (``_deepseek_piece_end``): below U+0100 no
    scalar is in its CJK ranges, so the text between numbers is one segment of the main pattern;
    -1 for whitespace and for a gap that no alternative matches. (A number is ``latin1_piece_end``'s.)"""
    if c1 == CAT_NUMBER:
        c1 = CAT_END  # (the segment ends there)
    j = at + 1
    if c0 == CAT_ASCII_PUNCT and c1 == CAT_ASCII_LETTER:
        j = at + 2
        while j < size and stage[data[j]] == CAT_ASCII_LETTER:
            j += 1
    elif _is_deepseek_word(c0) or (_is_deepseek_word(c1) and (c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_CONTROL)):
        while j < size:
            c = stage[data[j]]
            if c != CAT_LETTER and c != CAT_ASCII_LETTER and c != CAT_MARK:
                break
            j += 1
    elif c0 == CAT_OTHER or c0 == CAT_ASCII_PUNCT or (c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_ASCII_PUNCT)):
        while j < size:
            c = stage[data[j]]
            if c != CAT_OTHER and c != CAT_ASCII_PUNCT:
                break
            j += 1
        while j < size and (data[j] == 0x0A or data[j] == 0x0D):
            j += 1
    else:
        return -1
    if j == size and not whole:
        return -1
    return offset + j


def _latin1_punct_end(data: bytes, offset: i64, j: i64, size: i64, whole: bool, stage: bytes, slash: bool) -> i64:
    """``latin1_piece_end`` of `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*`` (``[\\r\\n/]*`` with ``slash``) whose run
    goes on from ``j``; -1 if it reaches the end of ``data`` before the end of the text."""
    while j < size:
        c = stage[data[j]]
        if c != CAT_OTHER and c != CAT_APOSTROPHE:
            break
        j += 1
    while j < size:
        b = data[j]
        if b != 0x0A and b != 0x0D and not (slash and b == 0x2F):
            break
        j += 1
    if j == size and not whole:
        return -1
    return offset + j


def _classic_piece_end(text: str, i: i64, n: i64, stage2: bytes, rules: i64) -> i64:
    """piece_end of the classic shape (llama3, qwen2, qwen3.5, and cl100k with RULE_END_SPACES)."""
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
        if c1 == CAT_LETTER:
            return _letters_end(text, i + 2, n, stage2)
        return i + 1
    if branch == BR_PUNCT:
        if c0 == CAT_SPACE:
            return _punct_end(text, i + 1, n, stage2)
        return _punct_end(text, i, n, stage2)
    if branch == BR_SPACE:
        return _space_end(text, i, n, stage2, rules)
    if branch == BR_NUMBER:
        return _number_end(text, i, n, stage2, rules & RULE_DIGITS)
    if branch == BR_CONTRACTION:
        end = _contraction_end(text, i, n)
        if end >= 0:
            return end
        return _letters_end(text, i + 2, n, stage2)  # late fallback: "'" prefixes the word
    raise _invalid(text, i)


def _gpt2_piece_end(text: str, i: i64, n: i64, stage2: bytes) -> i64:
    """piece_end of GPT-2's pattern (tokenizers' ``ByteLevel(use_regex=true)``).

    ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``: the
    contractions are lowercase only, the optional prefix of a word, a number or punctuation is
    U+0020 alone, numbers have no limit, nothing trails punctuation, and whitespace has no
    ``\\s*[\\r\\n]+`` alternative (a newline run is cut like a space run).
    """
    cp: i64 = ord(text[i])
    c0: i64 = _category(cp, stage2)
    c1: i64 = CAT_END
    if i + 1 < n:
        c1 = _category(ord(text[i + 1]), stage2)
    if cp == CP_APOSTROPHE and c1 == CAT_LETTER:
        c = ord(text[i + 1])
        if c == 0x73 or c == 0x74 or c == 0x6D or c == 0x64:  # s t m d
            return i + 2
        if i + 2 < n:
            c2 = ord(text[i + 2])
            if (c == 0x72 or c == 0x76) and c2 == 0x65 or c == 0x6C and c2 == 0x6C:  # re ve ll
                return i + 3
    j = i
    if c0 == CAT_SPACE and (c1 == CAT_LETTER or c1 == CAT_NUMBER or c1 == CAT_OTHER or c1 == CAT_APOSTROPHE):
        j = i + 1  # the " ?" of the next three alternatives
        c0 = c1
    if c0 == CAT_LETTER:
        return _letters_end(text, j + 1, n, stage2)
    if c0 == CAT_NUMBER:
        return _run_end(text, j + 1, n, stage2, CAT_NUMBER, CAT_NUMBER, CAT_NUMBER)
    if c0 == CAT_OTHER or c0 == CAT_APOSTROPHE:
        return _run_end(text, j + 1, n, stage2, CAT_OTHER, CAT_APOSTROPHE, CAT_APOSTROPHE)
    if c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_NEWLINE:
        j = _run_end(text, i + 1, n, stage2, CAT_SPACE, CAT_WHITESPACE, CAT_NEWLINE)
        if j == n or j - i == 1:
            return j  # the run reaches the end, or a lone whitespace before \S
        return j - 1  # leave the last whitespace to prefix what follows
    raise _invalid(text, i)


def _rust_numeric(cp: i64, stage2: bytes) -> bool:
    """Rust's ``char::is_numeric`` (the test of tokenizers' ``Digits``): \\p{N}, and the digits
    Unicode 17 added (Tolong Siki U+11DE0..U+11DE9, U+16FF4..U+16FF6), which tokenizers' Rust
    knows and the Unicode 16 of its Oniguruma (and of these tables) does not (measured on every
    scalar against the pinned tokenizers: ``tests/test_codepoints.py`` for family starcoder2)."""
    return _category(cp, stage2) == CAT_NUMBER or 0x11DE0 <= cp <= 0x11DE9 or 0x16FF4 <= cp <= 0x16FF6


def _digits_apart_piece_end(text: str, i: i64, n: i64, stage2: bytes) -> i64:
    """piece_end of StarCoder2's and SmolLM's ``Sequence[Digits(individual_digits=true),
    ByteLevel(use_regex=true)]``: each numeric scalar is a piece, and GPT-2's pattern runs on the
    text between two of them as on a text of its own (a space before a digit is not its prefix,
    and a whitespace run before one is one piece, as at the end of a text).

    GPT-2's piece at ``i`` looks no further than one scalar past its end (the one that ends a run
    or that ``\\s+(?!\\S)`` looks at), so it is found on the whole text first, and found again
    with the text ending at the first numeric scalar up to there, if any: each scalar is looked
    at a bounded number of times.
    """
    if _rust_numeric(ord(text[i]), stage2):
        return i + 1
    end = _gpt2_piece_end(text, i, n, stage2)
    p = i + 1
    last = min(end + 2, n)  # (through end + 1: a whitespace run's last scalar is left at end - 1)
    while p < last:
        if _rust_numeric(ord(text[p]), stage2):
            return _gpt2_piece_end(text, i, p, stage2)
        p += 1
    return end


def _is_cased_word(c: i64) -> bool:
    """A scalar the cased shape's words take: a letter of any case, or a mark."""
    return c == CAT_LOWER or c == CAT_UPPER or c == CAT_LETTER or c == CAT_MARK


def _lower_run_end(text: str, j: i64, n: i64, stage2: bytes) -> i64:
    """End of the cased shape's ``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]`` run from j (its ``Y+``).

    a-z is taken without reading the table, and any other ASCII scalar ends the run (none is Ll,
    Lm, Lo or M: tests/test_codepoints.py reads each after a letter); from the first scalar
    beyond ASCII the run is ``_run_end``'s (see the performance notes)."""
    while j < n:
        cp: i64 = ord(text[j])
        if 0x61 <= cp <= 0x7A:
            j += 1
        elif cp < 128:
            return j
        else:
            return _run_end(text, j, n, stage2, CAT_LOWER, CAT_LETTER, CAT_MARK)
    return j


def _cased_word_end(text: str, p: i64, n: i64, stage2: bytes, upper_only: bool) -> i64:
    """End of the cased word at p, or -1.

    The two alternatives are ``X*Y+`` then ``X+Y*``, with X = [Lu Lt Lm Lo M] and
    Y = [Ll Lm Lo M]. ``X*`` takes the whole X run [p, q); if a lowercase letter follows,
    ``Y+`` takes the Y run from q. Otherwise ``X*`` backtracks to the last scalar of the run
    that is also in Y (a caseless letter or a mark) and ``Y+`` takes that one scalar alone.
    With none, the first alternative fails and ``X+Y*`` (tried with ``upper_only``) takes
    the run itself when it is not empty (Y* is then empty: q is in neither set).
    """
    q = p
    last_both: i64 = -1
    c: i64 = CAT_END
    while q < n:
        cp: i64 = ord(text[q])
        if cp < 128:
            c = stage2[cp]
        else:
            block: i64 = STAGE1[cp >> SHIFT]
            c = stage2[(block << SHIFT) | (cp & MASK)]
        if c == CAT_UPPER:
            q += 1
        elif c == CAT_LETTER or c == CAT_MARK:
            last_both = q
            q += 1
        else:
            break
    if q < n and c == CAT_LOWER:  # (c: the category of the scalar at q, which ended the loop)
        return _lower_run_end(text, q + 1, n, stage2)
    if last_both >= 0:
        return last_both + 1
    if upper_only and q > p:
        return q
    return -1


def _cased_piece_end(text: str, i: i64, n: i64, stage2: bytes, rules: i64) -> i64:
    """piece_end of the cased shape (o200k, tekken).

    Alternatives, in the regex's order: the two cased words with an optional prefix
    ``[^\\r\\n\\p{L}\\p{N}]`` (and, with RULE_CONTRACTION_SUFFIX, a contraction
    after them), numbers, `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*`` (marks included), whitespace.
    A mark is both a word scalar and a possible prefix: the prefix is tried first.
    """
    cp: i64 = ord(text[i])
    if cp < 128:
        c0: i64 = stage2[cp]
    else:
        c0 = stage2[(i64(STAGE1[cp >> SHIFT]) << SHIFT) | (cp & MASK)]
    c1: i64 = CAT_END
    if i + 1 < n:
        cp = ord(text[i + 1])
        if cp < 128:
            c1 = stage2[cp]
        else:
            c1 = stage2[(i64(STAGE1[cp >> SHIFT]) << SHIFT) | (cp & MASK)]
    end: i64 = -1
    if c0 == CAT_LOWER or c0 == CAT_UPPER or c0 == CAT_LETTER:
        end = _cased_word_end(text, i, n, stage2, True)
    elif c0 == CAT_MARK:
        if i + 1 < n:
            end = _cased_word_end(text, i + 1, n, stage2, False)
        if end < 0:
            end = i + 1  # the mark alone: X* backtracks to nothing and Y+ takes the mark
    elif _is_cased_word(c1) and (
        c0 == CAT_OTHER or c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_APOSTROPHE
    ):
        end = _cased_word_end(text, i + 1, n, stage2, True)
    if end >= 0:
        if (rules & RULE_CONTRACTION_SUFFIX) != 0 and end + 1 < n and ord(text[end]) == CP_APOSTROPHE:
            suffix = _contraction_end(text, end, n)
            if suffix >= 0:
                return suffix
        return end
    if c0 == CAT_NUMBER:
        return _number_end(text, i, n, stage2, rules & RULE_DIGITS)
    if c0 == CAT_OTHER or c0 == CAT_APOSTROPHE or (c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_APOSTROPHE)):
        j = _run_end(text, i + 1, n, stage2, CAT_OTHER, CAT_APOSTROPHE, CAT_MARK)
        slash = (rules & RULE_SLASH_AFTER_PUNCT) != 0
        while j < n:
            cp = ord(text[j])
            if cp != 0x0A and cp != 0x0D and not (slash and cp == 0x2F):
                break
            j += 1
        return j
    if c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_NEWLINE:
        return _space_end(text, i, n, stage2, rules)
    raise _invalid(text, i)


def _deepseek_category(cp: i64, stage2: bytes, kind: i64) -> i64:
    """The category inside a segment of ``kind`` (0 or CJK_FLAG): the end where the segment ends.

    The pre-splits cut the text into segments (numbers, runs of the CJK ranges, the rest) and
    the main pattern runs inside each one, whose end is an end of text to it.
    """
    c = _category(cp, stage2)
    if c == CAT_NUMBER or (c & CJK_FLAG) != kind:
        return CAT_END
    return c & ~CJK_FLAG


def _is_deepseek_word(c: i64) -> bool:
    return c == CAT_LETTER or c == CAT_ASCII_LETTER or c == CAT_MARK


def _deepseek_piece_end(text: str, i: i64, n: i64, stage2: bytes) -> i64:
    """piece_end of DeepSeek-V3's three splits in one pass.

    ``\\p{N}{1,3}`` and ``[一-龥぀-ゟ゠-ヿ]+`` come first and cut the text into segments;
    the main pattern then runs inside each segment (a CJK run too: its kana marks,
    punctuation and unassigned scalars split it further), and a segment's end is an end
    of text to it (``\\s+(?!\\S)`` before a digit takes the whole run). Its alternatives:
    ``[ASCII punct][A-Za-z]+``, ``[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+``,
    `` ?[\\p{P}\\p{S}]+[\\r\\n]*`` and the whitespace ones; what none of them matches
    (controls, format characters, unassigned scalars) is a gap piece of its own.
    """
    first = _category(ord(text[i]), stage2)
    if first == CAT_NUMBER:
        return _number_end(text, i, n, stage2, 3)
    kind = first & CJK_FLAG
    c0 = first & ~CJK_FLAG
    c1: i64 = CAT_END
    if i + 1 < n:
        c1 = _deepseek_category(ord(text[i + 1]), stage2, kind)
    j = i + 1
    if c0 == CAT_ASCII_PUNCT and c1 == CAT_ASCII_LETTER:
        j = i + 2
        while j < n and _category(ord(text[j]), stage2) == CAT_ASCII_LETTER:
            j += 1
        return j
    if _is_deepseek_word(c0) or (
        _is_deepseek_word(c1) and (c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_CONTROL)
    ):
        # Letters and marks of this segment's kind: a number or the other kind ends the run.
        return _run_end(text, j, n, stage2, CAT_LETTER | kind, CAT_ASCII_LETTER | kind, CAT_MARK | kind)
    if c0 == CAT_OTHER or c0 == CAT_ASCII_PUNCT or (c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_ASCII_PUNCT)):
        while j < n:
            c = _deepseek_category(ord(text[j]), stage2, kind)
            if c != CAT_OTHER and c != CAT_ASCII_PUNCT:
                break
            j += 1
        while j < n and kind == 0:  # CR/LF end a CJK segment
            cp = ord(text[j])
            if cp != 0x0A and cp != 0x0D:
                break
            j += 1
        return j
    if c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_NEWLINE:
        return _space_end(text, i, n, stage2, SHAPE_DEEPSEEK << SHAPE_SHIFT)
    if c0 == CAT_CONTROL:
        # A gap: no alternative starts here. It runs on over controls that are not the
        # prefix of a word (a control followed by a letter or mark starts one).
        while j < n and _deepseek_category(ord(text[j]), stage2, kind) == CAT_CONTROL:
            if j + 1 < n and _is_deepseek_word(_deepseek_category(ord(text[j + 1]), stage2, kind)):
                break
            j += 1
        return j
    raise _invalid(text, i)


def split_pieces(text: str, stage2: bytes, rules: i64) -> list[str]:
    """The pieces of text, in order."""
    out: list[str] = []
    n: i64 = len(text)
    i: i64 = 0
    while i < n:
        end = piece_end(text, i, n, stage2, rules)
        out.append(text[i:end])
        i = end
    return out


def split_offsets(text: str, stage2: bytes, rules: i64) -> list[tuple[int, int]]:
    """The (start, end) character offsets of the pieces of text, in order; a piece's start is the
    int object of the piece before it's end (one int a piece, not two: 1 MB of English, 22.8 ->
    18.6 ms, best of 9)."""
    out: list[Any] = []
    n: i64 = len(text)
    i: i64 = 0
    start: object = boxed_int(0)
    while i < n:
        end = piece_end(text, i, n, stage2, rules)
        stop = boxed_int(end)
        out.append((start, stop))
        start = stop
        i = end
    return out


def boxed_int(value: i64) -> object:
    """``value`` as an int object, to be given as it is to several tuples (a variable assigned an
    i64 directly is narrowed to an int by mypy, and mypyc then makes a new object at each use)."""
    return value


def split_ends(text: str, stage2: bytes, rules: i64) -> list[int]:
    """The end offset of each piece: the compact form for engines built on the scanner."""
    out: list[int] = []
    n: i64 = len(text)
    i: i64 = 0
    while i < n:
        i = piece_end(text, i, n, stage2, rules)
        out.append(i)
    return out


def piece_count(text: str, stage2: bytes, rules: i64) -> i64:
    """The number of pieces of text: the scan alone, with nothing made per piece (what the
    pre-tokenizer costs inside an encode, for measurements)."""
    count: i64 = 0
    n: i64 = len(text)
    i: i64 = 0
    while i < n:
        i = piece_end(text, i, n, stage2, rules)
        count += 1
    return count


def _is_whitespace_after(before: i64, after: i64) -> bool:
    """A non-whitespace scalar then a whitespace other than CR/LF: no piece spans the two."""
    return (
        (after == CAT_WHITESPACE or after == CAT_SPACE)
        and before != CAT_WHITESPACE
        and before != CAT_SPACE
        and before != CAT_NEWLINE
        and before != CAT_SURROGATE
    )


def _deepseek_kind(c: i64) -> i64:
    """Which pre-split a category belongs to: numbers, CJK, or the main pattern's text."""
    if c == CAT_NUMBER:
        return c
    return c & CJK_FLAG


def forced_boundary(before: i64, after: i64, rules: i64) -> bool:
    """Whether a piece ends between two scalars of these categories, whatever surrounds them.

    Each rule also keeps the pieces before the boundary what they are at the end of the
    text (none of them looks past it), which is what the streaming encoder needs.
    """
    shape = (rules >> SHAPE_SHIFT) & SHAPE_MASK
    if before == CAT_NUMBER and after == CAT_NUMBER:
        return (rules & RULE_DIGITS) == 1
    if shape == SHAPE_DEEPSEEK:
        if _deepseek_kind(before) != _deepseek_kind(after):
            return True  # the pre-splits end a segment here
        before &= ~CJK_FLAG
        after &= ~CJK_FLAG
        if _is_deepseek_word(before) and (after == CAT_OTHER or after == CAT_ASCII_PUNCT):
            return True
        return _is_whitespace_after(before, after)
    if before == CAT_NUMBER:
        return True
    if shape == SHAPE_CASED:
        # A word may go on with a letter or a mark, or take a contraction after an apostrophe.
        if before == CAT_LETTER or before == CAT_UPPER or before == CAT_LOWER:
            if not _is_cased_word(after) and after != CAT_APOSTROPHE and after != CAT_SURROGATE:
                return True
        return _is_whitespace_after(before, after)
    if before == CAT_LETTER:
        return after != CAT_LETTER
    return _is_whitespace_after(before, after)


def final_boundary(text: str, stage2: bytes, rules: i64, window: i64, low: i64 = 0) -> i64:
    """The last ``c`` among the final ``window`` characters where a piece ends whatever follows.

    Rule 1 of ``peek2.serving.streaming`` (see its notes): the categories of ``text[c - 1]`` and
    ``text[c]`` alone force a boundary at ``c`` (``forced_boundary``: for the classic shape a
    letter then a non-letter, a number then a non-number (or any two numbers when pieces take
    one), a non-whitespace character then a whitespace other than CR/LF). Returns 0 if there
    is none. ``c`` below ``low`` is not looked at (the caller knows there is none). Compiled
    because the streaming encoder asks once per chunk.
    """
    n: i64 = len(text)
    if n < 2:
        return 0
    after = _category(ord(text[n - 1]), stage2)
    stop: i64 = n - window  # (no max(): a builtins call with a tuple of arguments, per chunk)
    if stop < low - 1:
        stop = low - 1
    if stop < 0:
        stop = 0
    c: i64 = n - 1
    while c > stop:
        before = _category(ord(text[c - 1]), stage2)
        if forced_boundary(before, after, rules):
            return c
        after = before
        c -= 1
    return 0


# Contexts of ``resume_context``: one scalar (two for punctuation, whose branch the second
# scalar decides) whose piece is in the given loop when the scalar after it comes.
CONTEXT_LOWER: Final = "a"  # cased: Y+ ([Ll Lm Lo M]); deepseek: its word loop, outside the CJK ranges
CONTEXT_CASELESS: Final = "\u4e00"  # cased: X* ([Lu Lt Lm Lo M]) after a caseless letter; deepseek: a CJK word
CONTEXT_PUNCT: Final = "!!"  # every shape: the run of punctuation (and marks, where it takes them)
CONTEXT_SPACE: Final = " "  # every shape: a whitespace run that holds no CR/LF (GPT-2's: any)


def resume_context(text: str, x: i64, stage2: bytes, rules: i64) -> str | None:
    """A short text ``h`` whose scan, going on into ``text[x:]``, is in the state the scan of
    ``text`` from 0 is in at ``x``; None when no such ``h`` is known.

    Then for any continuation ``w``, the first piece of ``h + text[x:] + w`` ends ``x - len(h)``
    characters before that of ``text + w``, if the latter ends after ``x``. A streaming encoder
    that has sent the ids of ``text[:x]`` keeps ``h`` in front of the rest instead of the whole
    piece (rule 3 of ``peek2.serving.streaming`` for a piece of several categories, which
    restarted at ``x`` the scanner may end elsewhere: o200k's ``"aMMMBc"`` read from the first
    mark ``M`` is one word, from its start two).

    The states are the loops of one branch whose future depends on nothing before ``x`` but the
    loop itself (each is ``_run_end``'s loop, or the loop of ``_cased_word_end``, whose memory is
    where its last caseless letter or mark was, here ``x - 1``):
    - cased words: in ``Y+`` after a lowercase letter, or in ``X*`` just after a caseless letter
      or a mark (``X*`` gives back up to there when no lowercase letter follows);
    - DeepSeek-V3's words (letters and marks of either kind of segment);
    - the run of punctuation of every shape (the CR/LF after it not reached yet);
    - a whitespace run with no CR/LF before ``x`` (whose backtracking depends only on where the run
      ends), any whitespace run for GPT-2's pattern.
    A run of one category (rule 3's usual case) needs none of this. ``text[:x + 1]`` must be in
    the piece that starts at 0 (the caller checks that the piece goes on past ``x``).
    """
    n: i64 = len(text)
    if x < 2 or x >= n:
        return None
    shape = (rules >> SHAPE_SHIFT) & SHAPE_MASK
    c0 = _category(ord(text[0]), stage2)
    c1 = _category(ord(text[1]), stage2)
    if shape == SHAPE_DEEPSEEK:
        kind = c0 & CJK_FLAG
        if (c1 & CJK_FLAG) != kind or c1 == CAT_NUMBER:
            return None  # (a segment of one scalar)
        c0 &= ~CJK_FLAG
        c1 &= ~CJK_FLAG
        if c0 == CAT_ASCII_PUNCT and c1 == CAT_ASCII_LETTER:
            return None  # [ASCII punct][A-Za-z]+: a run of one category
        if _is_deepseek_word(c0) or (_is_deepseek_word(c1) and (c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_CONTROL)):
            if _run_end(text, 1, x, stage2, CAT_LETTER | kind, CAT_ASCII_LETTER | kind, CAT_MARK | kind) != x:
                return None
            return CONTEXT_CASELESS if kind != 0 else CONTEXT_LOWER
        if kind != 0:
            return None
        if c0 == CAT_OTHER or c0 == CAT_ASCII_PUNCT or (c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_ASCII_PUNCT)):
            return CONTEXT_PUNCT if _run_end(text, 1, x, stage2, CAT_OTHER, CAT_ASCII_PUNCT, CAT_OTHER) == x else None
        return _space_context(text, x, stage2, False)
    if shape == SHAPE_CASED:
        if c0 == CAT_LOWER or c0 == CAT_UPPER or c0 == CAT_LETTER:
            start: i64 = 0
        elif c0 == CAT_MARK or (_is_cased_word(c1) and (c0 == CAT_OTHER or c0 == CAT_SPACE or c0 == CAT_WHITESPACE or c0 == CAT_APOSTROPHE)):
            start = 1
        elif c0 == CAT_OTHER or c0 == CAT_APOSTROPHE or (c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_APOSTROPHE)):
            return CONTEXT_PUNCT if _run_end(text, 1, x, stage2, CAT_OTHER, CAT_APOSTROPHE, CAT_MARK) == x else None
        else:
            return _space_context(text, x, stage2, False)
        q = _run_end(text, start, x, stage2, CAT_UPPER, CAT_LETTER, CAT_MARK)  # X*
        if q == x:
            last = _category(ord(text[x - 1]), stage2)
            return CONTEXT_CASELESS if x > start and (last == CAT_LETTER or last == CAT_MARK) else None
        if _category(ord(text[q]), stage2) != CAT_LOWER:
            return None
        return CONTEXT_LOWER if _run_end(text, q + 1, x, stage2, CAT_LOWER, CAT_LETTER, CAT_MARK) == x else None
    if shape == SHAPE_GPT2:
        if (rules & RULE_DIGITS) == 1:
            return None  # (StarCoder2's digits apart: its pieces are GPT-2's between numbers)
        if c0 == CAT_OTHER or c0 == CAT_APOSTROPHE or (c0 == CAT_SPACE and (c1 == CAT_OTHER or c1 == CAT_APOSTROPHE)):
            if ord(text[0]) == CP_APOSTROPHE and c1 == CAT_LETTER:
                return None
            return CONTEXT_PUNCT if _run_end(text, 1, x, stage2, CAT_OTHER, CAT_APOSTROPHE, CAT_APOSTROPHE) == x else None
        return _space_context(text, x, stage2, True)
    branch = DISPATCH[c0 * CAT_STRIDE + c1]
    if branch == BR_PUNCT:
        return CONTEXT_PUNCT if _run_end(text, 1, x, stage2, CAT_OTHER, CAT_APOSTROPHE, CAT_APOSTROPHE) == x else None
    if branch == BR_SPACE:
        return _space_context(text, x, stage2, False)
    return None


def _space_context(text: str, x: i64, stage2: bytes, newlines: bool) -> str | None:
    """``resume_context`` of a piece that is a whitespace run up to ``x`` (with ``newlines``, CR/LF
    are whitespace like any other: GPT-2's pattern), else None."""
    j = _run_end(text, 0, x + 1, stage2, CAT_SPACE, CAT_WHITESPACE, CAT_NEWLINE if newlines else CAT_SPACE)
    return CONTEXT_SPACE if j == x + 1 else None
