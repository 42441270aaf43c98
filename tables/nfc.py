"""Generate ``peek2/normalize/nfc_late.py``: the scalars the reference's NFC does not know.

Run ``python -m tables.nfc`` to write it, ``python -m tables.nfc --check`` to compare
with the committed file (the test suite does), ``python -m tables.nfc --measure`` to
redo the measurement below against the installed ``tokenizers``.

Which Unicode version
---------------------
The reference's ``normalizers.NFC`` (HuggingFace ``tokenizers``, version pinned in
pyproject.toml) is not the Unicode version of its regex engine. ``--measure`` asks
it, for every scalar with a non-zero canonical combining class in Unicode 16, whether
it reorders that mark against a mark of another class (``"A" + mark + U+0334``, or
``"A" + U+0345 + mark`` for class 1), and groups the answers by the scalar's Age.
On tokenizers 0.23.3:

    Age 1.1 .. 9.0:   every mark reordered (1,006 marks)
    Age 10.0 .. 16.0: no mark reordered (120 marks)

so its NFC data is Unicode 9.0. A scalar assigned later is, to it, an unassigned
code point: canonical combining class 0, no decomposition, in no composition. Such
a scalar is a starter that nothing composes with, so the reference's NFC is
Unicode-16 NFC applied to the runs between those scalars (canonical data of
assigned scalars never changes: Unicode's stability policy). Only the later
scalars that Unicode 16 NFC would touch matter: a non-zero class, a canonical
decomposition, or a place in another scalar's canonical decomposition. Those are
``LATE``; ``peek2.normalize.nfc`` cuts the text at them.

Ages come from ``unicodedataplus`` (same Unicode version as ``unicodedata2``; only
this generator needs it).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

import unicodedata2

from tables.generate import write_or_check

REFERENCE_NFC_VERSION = (9, 0)
OUTPUT = Path(__file__).resolve().parent.parent / "peek2" / "normalize" / "nfc_late.py"
MAX_SCALAR = 0x10FFFF


def scalars() -> list[str]:
    return [chr(cp) for cp in range(MAX_SCALAR + 1) if not 0xD800 <= cp <= 0xDFFF]


def canonical_decomposition(char: str) -> list[str]:
    fields = unicodedata2.decomposition(char).split()
    if not fields or fields[0].startswith("<"):
        return []  # none, or a compatibility mapping (not used by NFC)
    return [chr(int(field, 16)) for field in fields]


def age(char: str) -> tuple[int, int]:
    import unicodedataplus  # type: ignore[import-not-found]

    if unicodedataplus.unidata_version != unicodedata2.unidata_version:
        raise SystemExit(
            f"unicodedataplus has Unicode {unicodedataplus.unidata_version}, unicodedata2 "
            f"{unicodedata2.unidata_version}: install matching versions"
        )
    major, minor = unicodedataplus.age(char).split(".")[:2]
    return int(major), int(minor)


def late_scalars() -> list[str]:
    """Scalars newer than the reference's NFC data that Unicode 16 NFC does not leave alone."""
    every = scalars()
    in_decomposition = {part for char in every for part in canonical_decomposition(char)}
    active = [
        char
        for char in every
        if unicodedata2.combining(char) or canonical_decomposition(char) or char in in_decomposition
    ]
    return [char for char in active if age(char) > REFERENCE_NFC_VERSION]


HANGUL_SECONDS = [chr(cp) for cp in (*range(0x1161, 0x1176), *range(0x11A8, 0x11C3))]  # composed by rule


def not_boundaries(late: list[str]) -> list[str]:
    """Starters before which NFC may not cut text: their decomposition starts with a non-starter or
    with a starter that composes with what precedes it. Every other starter begins a run of text that
    normalizes independently of what comes before (peek2/normalize/nfc.py cuts long texts there)."""
    every = scalars()
    seconds = {parts[1] for char in every if len(parts := canonical_decomposition(char)) == 2}
    seconds.update(HANGUL_SECONDS)

    def first(char: str) -> str:
        parts = canonical_decomposition(char)
        return first(parts[0]) if parts else char

    skip = set(late)
    return [
        char
        for char in every
        if char not in skip
        and not unicodedata2.combining(char)
        and (unicodedata2.combining(first(char)) or first(char) in seconds)
    ]


def stream_sticky() -> tuple[list[str], list[str], list[str], dict[str, list[str]]]:
    """What a stream needs to know of where NFC may join a scalar to what precedes it
    (``peek2.serving.stream_engine``; built at a stream's first NFC text before: 39 ms).

    A cut before ``c`` is safe when ``c`` has combining class 0, its full decomposition starts
    with a class-0 character that is never the second character of a canonical composition, and
    ``c`` is not such a second character either (Hangul vowel and trailing jamo included): the
    others are ``sticky``. Scalars newer than the reference's 9.0 are only ever made stickier,
    so the rule stays safe. Of the sticky scalars, ``seconds``: the class-0 ones that are only
    ever the second half of a composition (Tamil U+0BBE, Bengali U+09D7, ...), whose joining
    depends on the scalar before them alone; ``seconds_after_marks``: those of them that no
    composite of a starter and marks can take. ``composites``: second half -> the composites
    NFC makes of it."""
    sticky: set[str] = set()
    made_from_marks: set[str] = set()  # second halves whose first half is itself a composite
    starting: list[str] = []  # scalars whose decomposition starts with a class-0 scalar
    composites: dict[str, list[str]] = {}
    for cp in range(0x80, 0x30000):  # above: no combining class or decomposition in Unicode 16
        char = chr(cp)
        if unicodedata2.combining(char):
            sticky.add(char)
            continue
        decomposition: str = unicodedata2.decomposition(char)
        if not decomposition or decomposition.startswith("<"):
            continue
        parts = [chr(int(p, 16)) for p in decomposition.split()]
        if unicodedata2.combining(parts[0]):
            sticky.add(char)
        else:
            starting.append(char)  # decided below, from the start of its full decomposition
        if len(parts) == 2:
            sticky.add(parts[1])  # may compose with what precedes it
            if unicodedata2.normalize("NFC", parts[0] + parts[1]) == char:  # (NFC makes it: not excluded)
                composites.setdefault(parts[1], []).append(char)
            if unicodedata2.normalize("NFD", parts[0]) != parts[0]:
                made_from_marks.add(parts[1])
    sticky.update(chr(cp) for cp in range(0x1161, 0x1176))  # Hangul V jamo
    sticky.update(chr(cp) for cp in range(0x11A8, 0x11C3))  # Hangul T jamo
    for char in starting:
        # (U+212B ANGSTROM SIGN decomposes to U+00C5, then to "A" and a ring: a cut before it is
        # as safe as before "A"; held as sticky, a run of them stayed pending whole)
        if unicodedata2.normalize("NFD", char)[0] in sticky:
            sticky.add(char)
    seconds = {c for c in sticky if not unicodedata2.combining(c) and unicodedata2.normalize("NFD", c) == c and not 0x1100 <= ord(c) < 0x1200}
    return sorted(sticky), sorted(seconds), sorted(seconds - made_from_marks), composites


def escaped_ranges(chars: list[str]) -> str:
    """A regular expression's character class body (no brackets) of ``chars``, as ranges."""
    codes = sorted(ord(char) for char in chars)
    ranges: list[tuple[int, int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    escaped = [f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges]
    lines = ["".join(escaped[i : i + 5]) for i in range(0, len(escaped), 5)]
    return "\n".join(f'    "{line}"' for line in lines)


def escaped(chars: str | list[str]) -> str:
    """``chars`` as \\U escapes (the body of a str literal)."""
    return "".join(f"\\U{ord(char):08x}" for char in chars)


def escaped_lines(chars: list[str]) -> str:
    text = escaped(chars)
    lines = [text[i : i + 100] for i in range(0, len(text), 100)]  # 10 whole escapes a line
    return "\n".join(f'    "{line}"' for line in lines)


def render() -> str:
    late = late_scalars()
    body = escaped_lines(late)
    before = not_boundaries(late)
    starters = escaped_lines(before)
    marks = [char for char in scalars() if unicodedata2.combining(char) and char not in late]
    mark_ranges = escaped_ranges(marks)
    # (each class below adds ranges to the one before it: one list of the marks in the file)
    before_ranges = escaped_ranges(before)
    skip = {*late, *marks, *before}
    decomposing = [
        char for char in scalars()
        if ord(char) >= 0x300 and char not in skip and canonical_decomposition(char) and not 0xAC00 <= ord(char) <= 0xD7A3
    ]
    decomposing_ranges = escaped_ranges(decomposing)
    sticky, seconds, seconds_after_marks, composites = stream_sticky()
    composites_lines = "\n".join(f'    "{escaped(second)}": "{escaped(made)}",' for second, made in sorted(composites.items()))
    return f'''# Generated by tables/nfc.py from unicodedata2 {importlib.metadata.version("unicodedata2")}
# (Unicode {unicodedata2.unidata_version}). Do not edit: run `python -m tables.nfc`.
"""Scalars the reference's NFC (Unicode {REFERENCE_NFC_VERSION[0]}.{REFERENCE_NFC_VERSION[1]} data) treats as unassigned starters.

See tables/nfc.py for the measurement; peek2/normalize/nfc.py normalizes around them.
"""

from typing import Final

REFERENCE_NFC_VERSION: Final = "{REFERENCE_NFC_VERSION[0]}.{REFERENCE_NFC_VERSION[1]}"
LATE: Final = frozenset(
{body}
)
NOT_BOUNDARIES: Final = frozenset(
{starters}
)
"""Starters before which NFC may not cut text (a decomposition that starts with a non-starter, or a
starter that composes with what precedes it); LATE left out."""
MARK_CLASS: Final = (
{mark_ranges}
)
"""The scalars of a combining class other than 0 (LATE left out), as the body of a regular
expression's character class: a long run of them is found at the speed of ``re``."""
NOT_BOUNDARY_CLASS: Final = MARK_CLASS + (
{before_ranges}
)
"""The scalars before which NFC may not cut text (the marks, and NOT_BOUNDARIES; LATE left out), as
the body of a character class."""
CHANGED_NEAR_CLASS: Final = NOT_BOUNDARY_CLASS + (
{decomposing_ranges}
)
"""Where NFC may change text that holds no LATE scalar: NOT_BOUNDARY_CLASS and the scalars from
U+0300 on with a canonical decomposition (Hangul syllables left out), as the body of a character
class. A character outside it, after one outside it or at the start, is left as it is; so is one
below U+0300 followed by such a character."""
STREAM_STICKY: Final = frozenset(
{escaped_lines(sticky)}
)
"""Scalars that NFC may join to what precedes them (a stream cuts before none of them without
looking further): the marks, second halves of compositions, Hangul V and T jamo, and scalars
whose full decomposition starts with one of those (``stream_sticky`` in tables/nfc.py)."""
STREAM_STICKY_SECONDS: Final = frozenset(
{escaped_lines(seconds)}
)
"""Of STREAM_STICKY, the class-0 scalars that are only ever the second half of a composition."""
STREAM_STICKY_SECONDS_AFTER_MARKS: Final = frozenset(
{escaped_lines(seconds_after_marks)}
)
"""Of STREAM_STICKY_SECONDS, those that no composite of a starter and marks can take."""
COMPOSITES_BY_SECOND: Final = {{
{composites_lines}
}}
"""Second half of a canonical composition -> the composites NFC makes of it, in code point order."""
'''


def measure() -> int:
    """Group the reference's reordering of each Unicode-16 mark by the mark's Age; 1 if ages mix."""
    from tokenizers import normalizers

    nfc = normalizers.NFC()
    known: dict[tuple[int, int], list[bool]] = {}
    for char in scalars():
        klass = unicodedata2.combining(char)
        if not klass:
            continue
        text = "A" + char + "\u0334" if klass > 1 else "A\u0345" + char
        known.setdefault(age(char), []).append(nfc.normalize_str(text) != text)
    for version in sorted(known):
        answers = known[version]
        print(f"Age {version[0]}.{version[1]:<3} {sum(answers):5} of {len(answers):4} marks reordered")
    newest_known = max((v for v, a in known.items() if any(a)), default=(0, 0))
    consistent = all(all(a) if v <= newest_known else not any(a) for v, a in known.items())
    print(f"reference NFC data: Unicode {newest_known[0]}.{newest_known[1]}" + ("" if consistent else " (ages mix!)"))
    return 0 if consistent and newest_known == REFERENCE_NFC_VERSION else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file, write nothing")
    parser.add_argument("--measure", action="store_true", help="measure the reference's NFC version")
    args = parser.parse_args(argv)
    if args.measure:
        return measure()
    return write_or_check(OUTPUT, render(), args.check, "python -m tables.nfc")


if __name__ == "__main__":
    sys.exit(main())
