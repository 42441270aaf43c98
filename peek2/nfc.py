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

Performance notes: ASCII returns at once; other text pays one ``frozenset.isdisjoint``
pass (measured at about a tenth of ``unicodedata2.normalize`` on XNLI text) before
the C normalizer; the slow path only runs on text that holds a late scalar.
"""

from __future__ import annotations

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2._nfc_late import LATE


def nfc(text: str) -> str:
    """``text`` in Normalization Form C, as the reference normalizes it."""
    if text.isascii():
        return text  # ASCII is always NFC
    if LATE.isdisjoint(text):
        normalized: str = unicodedata2.normalize("NFC", text)
        return normalized
    parts: list[str] = []
    start = 0
    for index, char in enumerate(text):
        if char in LATE:
            parts.append(unicodedata2.normalize("NFC", text[start:index]))
            parts.append(char)
            start = index + 1
    parts.append(unicodedata2.normalize("NFC", text[start:]))
    return "".join(parts)


# ==== NFC with alignments (for offsets) ====

_HANGUL_S, _HANGUL_L, _HANGUL_V, _HANGUL_T = 0xAC00, 0x1100, 0x1161, 0x11A7
_HANGUL_V_COUNT, _HANGUL_T_COUNT = 21, 28
_HANGUL_N = _HANGUL_V_COUNT * _HANGUL_T_COUNT
_HANGUL_S_COUNT = 19 * _HANGUL_N
_compositions: dict[tuple[str, str], str] = {}


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
    if not _compositions:
        _load_compositions()
    return _compositions.get((first, second))


def _load_compositions() -> None:
    # Primary composites: a two-character canonical decomposition that NFC itself keeps
    # (composition exclusions and late scalars fail that test).
    for code in range(0x110000):
        char = chr(code)
        mapping = unicodedata2.decomposition(char).split()
        if len(mapping) == 2 and not mapping[0].startswith("<") and char not in LATE and nfc(char) == char:
            _compositions[(chr(int(mapping[0], 16)), chr(int(mapping[1], 16)))] = char
