"""NFC exactly as the reference's ``normalizers.NFC`` computes it.

The reference normalizes with Unicode 9.0 data (measured: tables/nfc.py), so a
scalar assigned later is to it an unassigned starter that nothing reorders or
composes across. peek2 runs Unicode-16 NFC (``unicodedata2``, pinned) on the text
between such scalars, which gives the same result; canonical data of older scalars
never changes.

>>> nfc("e\\u0301")
'é'
>>> nfc("A\\u0327\\u07fd") == "A\\u0327\\u07fd"  # U+07FD (Unicode 11) is not reordered
True

Long runs of marks: the C normalizer orders each run of marks by insertion sort, quadratic in the
run ("e" + 80,000 marks of two classes took 2.1 s, 4x the marks 15x the time). So text that is not
already NFC is normalized in chunks of about ``CHUNK`` scalars, each cut just before a starter that
nothing composes with across (``_boundary``: NFC of the two sides is NFC of the whole), and a stretch
of ``CHUNK`` scalars with no such starter (a long run of marks) is put in canonical order by a
stable sort (n log n) before the C normalizer composes it: its insertion sort does nothing on a run
already in order.

Performance notes: ASCII returns at once; other text pays one ``frozenset.isdisjoint`` pass
(about a tenth of ``unicodedata2.normalize`` on XNLI text) and the quick check of the standard
library's ``unicodedata.is_normalized`` (C; its Unicode version is older than 16, but only for
scalars newer than the reference's 9.0, and those that NFC touches are LATE, cut out before). Only
text that is not NFC pays the chunks (a few percent over one C call on XNLI). A pre-scan for long
runs with a compiled ``re`` character class cost 47 ns a character, twice the normalization itself.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2.normalize.nfc_late import LATE, NOT_BOUNDARIES

CHUNK: Final = 256
"""Scalars normalized by one C call at most (its insertion sort costs at most CHUNK**2 / 2 swaps)."""


def nfc(text: str) -> str:
    """``text`` in Normalization Form C, as the reference normalizes it."""
    if text.isascii():
        return text  # ASCII is always NFC
    if LATE.isdisjoint(text):
        return _nfc(text)
    parts: list[str] = []
    start = 0
    for index, char in enumerate(text):
        if char in LATE:
            parts.append(_nfc(text[start:index]))
            parts.append(char)
            start = index + 1
    parts.append(_nfc(text[start:]))
    return "".join(parts)


def _boundary(char: str) -> bool:
    """True when NFC may cut text just before ``char`` (see the module notes)."""
    return not unicodedata2.combining(char) and char not in NOT_BOUNDARIES


def _nfc(text: str) -> str:
    """Unicode-16 NFC of text without late scalars, linear however long its runs of marks."""
    if unicodedata.is_normalized("NFC", text):
        return text
    n = len(text)
    if n <= CHUNK:
        return str(unicodedata2.normalize("NFC", text))
    parts: list[str] = []
    start = 0
    while start < n:
        end = start + CHUNK
        if end >= n:
            parts.append(unicodedata2.normalize("NFC", text[start:]))
            break
        cut = end
        while cut > start and not _boundary(text[cut]):
            cut -= 1
        if cut > start:
            parts.append(unicodedata2.normalize("NFC", text[start:cut]))
            start = cut
            continue
        while end < n and not _boundary(text[end]):  # CHUNK scalars and more with no cut
            end += 1
        parts.append(_nfc_sorted(text[start:end]))
        start = end
    return "".join(parts)


def _nfc_sorted(text: str) -> str:
    """NFC of ``text``, its runs of marks put in canonical order by a stable sort first."""
    chars: list[str] = []
    for char in text:
        chars.extend(unicodedata2.normalize("NFD", char))
    classes = [unicodedata2.combining(char) for char in chars]
    at = 0
    while at < len(chars):
        if not classes[at]:
            at += 1
            continue
        stop = at
        while stop < len(chars) and classes[stop]:
            stop += 1
        chars[at:stop] = sorted(chars[at:stop], key=unicodedata2.combining)
        at = stop
    return str(unicodedata2.normalize("NFC", "".join(chars)))


# ==== NFC with alignments (for offsets) ====

_HANGUL_S, _HANGUL_L, _HANGUL_V, _HANGUL_T = 0xAC00, 0x1100, 0x1161, 0x11A7
_HANGUL_V_COUNT, _HANGUL_T_COUNT = 21, 28
_HANGUL_N = _HANGUL_V_COUNT * _HANGUL_T_COUNT
_HANGUL_S_COUNT = 19 * _HANGUL_N
_compositions: dict[str, str] = {}  # pair -> composite, or "" for none
_COMPOSITIONS_KEPT: Final = 1 << 16


def nfc_aligned(text: str) -> tuple[str, list[int]]:
    """``nfc(text)`` and, for each of its characters, the index in ``text`` it is aligned to.

    The reference's rules (its normalizer reports, per output character, how many characters
    it adds or removes, and the alignment is then read off by position, measured against it):
    the first part of a decomposition has change 0 and each further part +1; canonical
    reordering moves the changes with the characters; a composition keeps the starter's change
    and adds (change - 1) of each absorbed mark. Walking the output, a character with change
    <= 0 takes the next source index (a negative change then skips as many), and one with
    change > 0 repeats the previous one. So a mark moved past others is aligned by position,
    not to the character it came from, exactly like the reference.

    >>> nfc_aligned("e\\u0301 ok")
    ('é ok', [0, 2, 3, 4])
    """
    normalized = nfc(text)
    if normalized == text:
        return text, list(range(len(text)))
    # NFC never reaches across an ASCII character (a starter that composes with nothing before
    # it), so blocks that start at one are normalized and aligned alone, and only the few that
    # change take the character-by-character rules below: a text of 1.6 MB in 15 languages with
    # a few decomposed accents took 2.1 s whole, 0.1 s in blocks.
    parts: list[str] = []
    source: list[int] = []
    start = 0
    while start < len(text):
        boundary = _ASCII.search(text, start + _BLOCK) if start + _BLOCK < len(text) else None
        end = boundary.start() if boundary is not None else len(text)
        block = text[start:end]
        block_normalized = nfc(block)
        if block_normalized == block:
            source.extend(range(start, end))
        else:
            block_normalized, block_source = _nfc_aligned_block(block)
            source.extend([start + k for k in block_source])
        parts.append(block_normalized)
        start = end
    result = "".join(parts)
    if result != normalized:  # (blocks cut where they may be: their forms add up to the text's)
        raise AssertionError(f"NFC in blocks disagrees with NFC on {ascii(text)}")
    return result, source


_ASCII: Final = re.compile("[\x00-\x7f]")
_BLOCK: Final = 512


def _nfc_aligned_block(text: str) -> tuple[str, list[int]]:
    """``nfc_aligned`` of a text that NFC changes, character by character (the rules above)."""
    normalized = nfc(text)
    # 1. Full canonical decomposition: change 0 for a first part, +1 for each further part.
    chars: list[str] = []
    changes: list[int] = []
    for char in text:
        for k, part in enumerate(_decompose(char)):
            chars.append(part)
            changes.append(1 if k else 0)
    # 2. Canonical ordering: a stable sort by combining class of each run of non-starters.
    classes = [_combining(c) for c in chars]
    start = 0
    while start < len(chars):
        if classes[start] == 0:
            start += 1
            continue
        end = start
        while end < len(chars) and classes[end] != 0:
            end += 1
        order = sorted(range(start, end), key=lambda k: classes[k])
        chars[start:end] = [chars[k] for k in order]
        changes[start:end] = [changes[k] for k in order]
        classes[start:end] = [classes[k] for k in order]
        start = end
    # 3. Canonical composition with the last starter, unless blocked.
    out_chars: list[str] = []
    out_changes: list[int] = []
    out_classes: list[int] = []
    starter = -1  # index in out_* of the last starter
    for char, change, klass in zip(chars, changes, classes):
        if starter >= 0:
            between = len(out_chars) - 1 > starter
            blocked = between and (out_classes[-1] == 0 or out_classes[-1] >= klass)
            composite = None if blocked else _compose(out_chars[starter], char)
            if composite is not None:
                out_chars[starter] = composite
                out_changes[starter] += change - 1
                continue
        out_chars.append(char)
        out_changes.append(change)
        out_classes.append(klass)
        if klass == 0:
            starter = len(out_chars) - 1
    result = "".join(out_chars)
    if result != normalized:  # the rules above must agree with the normalizer itself
        raise AssertionError(f"NFC alignment disagrees with NFC on {ascii(text)}")
    # 4. Read the alignment off by position.
    source: list[int] = []
    consumed = 0
    for change in out_changes:
        if change > 0:
            source.append(consumed - 1)
        else:
            source.append(consumed)
            consumed += 1 - change
    return result, source


def _combining(char: str) -> int:
    return 0 if char in LATE else int(unicodedata2.combining(char))


def _decompose(char: str) -> list[str]:
    code = ord(char)
    if _HANGUL_S <= code < _HANGUL_S + _HANGUL_S_COUNT:
        offset = code - _HANGUL_S
        parts = [chr(_HANGUL_L + offset // _HANGUL_N), chr(_HANGUL_V + (offset % _HANGUL_N) // _HANGUL_T_COUNT)]
        if offset % _HANGUL_T_COUNT:
            parts.append(chr(_HANGUL_T + offset % _HANGUL_T_COUNT))
        return parts
    if char in LATE:
        return [char]
    mapping = unicodedata2.decomposition(char).split()
    if not mapping or mapping[0].startswith("<"):
        return [char]
    return [part for field in mapping for part in _decompose(chr(int(field, 16)))]


def _compose(first: str, second: str) -> str | None:
    """The primary composite of two characters, or None."""
    a, b = ord(first), ord(second)
    if _HANGUL_L <= a < _HANGUL_L + 19 and _HANGUL_V <= b < _HANGUL_V + _HANGUL_V_COUNT:
        return chr(_HANGUL_S + ((a - _HANGUL_L) * _HANGUL_V_COUNT + b - _HANGUL_V) * _HANGUL_T_COUNT)
    if (
        _HANGUL_S <= a < _HANGUL_S + _HANGUL_S_COUNT
        and (a - _HANGUL_S) % _HANGUL_T_COUNT == 0
        and _HANGUL_T < b < _HANGUL_T + _HANGUL_T_COUNT
    ):
        return chr(a + b - _HANGUL_T)
    key = first + second
    composite = _compositions.get(key)
    if composite is None:
        composite = _primary_composite(first, second)
        if len(_compositions) >= _COMPOSITIONS_KEPT:
            _compositions.clear()
        _compositions[key] = composite
    return composite or None


def _primary_composite(first: str, second: str) -> str:
    """The primary composite of the pair, or "" (asked of the normalizer, not of a table).

    NFC turns the pair into one scalar exactly when that scalar's canonical decomposition is the
    pair and it is not excluded from composition: in ``nfc_aligned`` the first is a starter that
    has absorbed marks of lower or equal class only, so NFC finds it in canonical order.
    """
    if first in LATE or second in LATE:
        return ""  # unknown to the reference
    composed = unicodedata2.normalize("NFC", first + second)
    if len(composed) != 1 or composed in LATE:
        return ""
    fields = unicodedata2.decomposition(composed).split()
    if fields != [f"{ord(first):04X}", f"{ord(second):04X}"]:
        return ""
    return str(composed)
