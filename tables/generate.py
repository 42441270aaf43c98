"""Generate ``peek2/pretokenize/tables.py``: the class of every Unicode scalar, as a two-stage table.

Run ``python -m tables.generate`` after changing this file or the pinned
``unicodedata2``; ``python -m tables.generate --check`` exits non-zero when the
committed module differs from what this generator writes (the test suite runs it).

Which Unicode version
---------------------
The reference is HuggingFace ``tokenizers`` (version pinned in pyproject.toml),
whose ``Regex`` is Oniguruma. Its Unicode version was measured, not assumed:
``python -m tables.measure`` splits the string of all 1,112,064 scalars with
``Split(Regex(r"\\p{L}"), behavior="removed")`` (likewise ``\\p{N}``, ``\\p{M}``,
``\\s``), reads back which scalars the regex matched, and compares the sets with
``unicodedata2``'s general categories. On tokenizers 0.23.3:

    unicodedata2 15.1.0: 4,302 letters, 80 numbers, 51 marks missing
    unicodedata2 16.0.0: identical sets
    unicodedata2 17.0.0: 4,644 letters, 13 numbers, 42 marks too many

so the tables are generated from unicodedata2 16.0.0 (Unicode 16.0.0).
Oniguruma's ``\\s`` is the 25-scalar White_Space property (PropList.txt,
unchanged since Unicode 6.3; ``unicodedata2`` does not expose it, so it is
spelled out below and checked by the measurement and the code-point tests).

Classes
-------
Each scalar gets one class, fine enough for every family: letters by case (the
o200k family splits words at case changes), ASCII letters and punctuation apart
(DeepSeek-V3's first alternative is ASCII-only), punctuation and symbols apart
from controls and unassigned scalars (which DeepSeek-V3's pattern leaves as gaps),
and the CJK ranges of DeepSeek-V3's pre-split by category. A family maps classes
to the scanner's categories (``peek2/pretokenize/pattern.py``: for llama3 every letter
class is "letter" and ``CLASS_MARK`` is "other"), so the families share this one
table. Surrogates get their own class so that the scanner can refuse them (as
``tokenizers`` does) without a separate validation pass.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from pathlib import Path

import unicodedata2

UNICODE_VERSION = "16.0.0"
OUTPUT = Path(__file__).resolve().parent.parent / "peek2" / "pretokenize" / "tables.py"

# Class ids: stable, small, shared with peek2/pretokenize/scanner.py (whose categories 0..8 are the first nine
# classes; a family maps every class to one of its categories, see peek2/pretokenize/pattern.py).
CLASS_OTHER = 0  # \p{P} and \p{S} outside ASCII and the CJK ranges
CLASS_LETTER = 1  # \p{Lm} and \p{Lo} (letters without case) outside the CJK ranges
CLASS_NUMBER = 2
CLASS_MARK = 3
CLASS_WHITESPACE = 4  # \s other than U+0020, CR and LF
CLASS_SPACE = 5  # U+0020: the only scalar the " ?" of the punctuation branch takes
CLASS_NEWLINE = 6  # CR and LF
CLASS_APOSTROPHE = 7  # U+0027: starts the contraction branch
CLASS_SURROGATE = 8  # U+D800..U+DFFF: refused
CLASS_UPPER = 9  # \p{Lu} and \p{Lt} outside ASCII
CLASS_LOWER = 10  # \p{Ll} outside ASCII
CLASS_ASCII_UPPER = 11  # A-Z
CLASS_ASCII_LOWER = 12  # a-z
CLASS_ASCII_PUNCT = 13  # ASCII punctuation and symbols but the apostrophe
CLASS_CONTROL = 14  # \p{C} that is not \s: controls, format, private use, unassigned
# DeepSeek-V3's CJK split, [一-龥぀-ゟ゠-ヿ]: U+4E00..U+9FA5, U+3040..U+30FF, by category.
CLASS_CJK_LETTER = 15
CLASS_CJK_MARK = 16
CLASS_CJK_PUNCT = 17
CLASS_CJK_UNASSIGNED = 18
CLASS_COUNT = 19

CJK_RANGES = ((0x4E00, 0x9FA5), (0x3040, 0x30FF))

# The classes that make up \p{L} and \p{M}: written into peek2/pretokenize/tables.py for the families, and
# measured against the reference by tables/measure.py (the CJK classes hold no cased letter).
LETTER_CLASSES = (CLASS_LETTER, CLASS_UPPER, CLASS_LOWER, CLASS_ASCII_UPPER, CLASS_ASCII_LOWER, CLASS_CJK_LETTER)
MARK_CLASSES = (CLASS_MARK, CLASS_CJK_MARK)

# PropList.txt White_Space (Unicode 6.3 and later).
WHITE_SPACE = frozenset(
    [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680]
    + list(range(0x2000, 0x200B))
    + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)

MAX_SCALAR = 0x10FFFF


def scalar_class(cp: int) -> int:
    """The class of one code point under the pinned Unicode version."""
    if 0xD800 <= cp <= 0xDFFF:
        return CLASS_SURROGATE
    if cp in (0x0A, 0x0D):
        return CLASS_NEWLINE
    if cp == 0x20:
        return CLASS_SPACE
    if cp in WHITE_SPACE:
        return CLASS_WHITESPACE
    if cp == 0x27:
        return CLASS_APOSTROPHE
    category = unicodedata2.category(chr(cp))
    major = category[0]
    if any(lo <= cp <= hi for lo, hi in CJK_RANGES):
        return {"L": CLASS_CJK_LETTER, "M": CLASS_CJK_MARK, "P": CLASS_CJK_PUNCT, "S": CLASS_CJK_PUNCT}.get(
            major, CLASS_CJK_UNASSIGNED
        )
    if major == "L":
        if cp < 128:
            return CLASS_ASCII_UPPER if category == "Lu" else CLASS_ASCII_LOWER
        if category in ("Lu", "Lt"):
            return CLASS_UPPER
        return CLASS_LOWER if category == "Ll" else CLASS_LETTER
    if major == "N":
        return CLASS_NUMBER
    if major == "M":
        return CLASS_MARK
    if major in ("P", "S"):
        return CLASS_ASCII_PUNCT if cp < 128 else CLASS_OTHER
    return CLASS_CONTROL


def two_stage(classes: bytes, shift: int) -> tuple[bytes, bytes]:
    """Split ``classes`` into blocks of ``1 << shift``; STAGE1 names each block's index in STAGE2."""
    size = 1 << shift
    blocks: dict[bytes, int] = {}
    stage1 = bytearray()
    stage2 = bytearray()
    for start in range(0, len(classes), size):
        block = classes[start : start + size]
        if block not in blocks:
            blocks[block] = len(blocks)
            stage2 += block
        stage1.append(blocks[block])  # raises if more than 256 blocks: then pick another shift
    return bytes(stage1), bytes(stage2)


def best_shift(classes: bytes) -> int:
    """The block size giving the smallest pair of tables with at most 256 distinct blocks."""
    sizes: dict[int, int] = {}
    for shift in range(5, 11):
        try:
            s1, s2 = two_stage(classes, shift)
        except ValueError:
            continue
        sizes[shift] = len(s1) + len(s2)
    return min(sizes, key=lambda s: (sizes[s], s))


def bytes_literal(name: str, data: bytes, width: int = 48) -> str:
    lines = [f"{name}: Final = ("]
    for start in range(0, len(data), width):
        chunk = "".join(f"\\x{b:02x}" for b in data[start : start + width])
        lines.append(f'    b"{chunk}"')
    lines.append(")")
    return "\n".join(lines)


def render() -> str:
    if unicodedata2.unidata_version != UNICODE_VERSION:
        raise SystemExit(
            f"unicodedata2 has Unicode {unicodedata2.unidata_version}, the reference uses "
            f"{UNICODE_VERSION}: pip install unicodedata2=={UNICODE_VERSION}"
        )
    classes = bytes(scalar_class(cp) for cp in range(MAX_SCALAR + 1))
    shift = best_shift(classes)
    stage1, stage2 = two_stage(classes, shift)
    if stage2[:128] != classes[:128]:
        # peek2/pretokenize/scanner.py reads ASCII straight from STAGE2, skipping STAGE1.
        raise SystemExit("STAGE2 must begin with the classes of U+0000..U+007F")
    header = f'''# Generated by tables/generate.py from unicodedata2 {importlib.metadata.version("unicodedata2")}
# (Unicode {unicodedata2.unidata_version}). Do not edit: run `python -m tables.generate`.
"""Class of every Unicode scalar: ``STAGE2[STAGE1[cp >> SHIFT] << SHIFT | cp & MASK]``.

STAGE2 begins with the classes of U+0000..U+007F, so ASCII may skip STAGE1.

Class ids are the CLASS_* constants below; see tables/generate.py for how the
Unicode version was chosen (measured against the reference's Oniguruma).
"""

from typing import Final

UNICODE_VERSION: Final = "{unicodedata2.unidata_version}"
SHIFT: Final = {shift}
MASK: Final = {(1 << shift) - 1}

CLASS_OTHER: Final = {CLASS_OTHER}
CLASS_LETTER: Final = {CLASS_LETTER}
CLASS_NUMBER: Final = {CLASS_NUMBER}
CLASS_MARK: Final = {CLASS_MARK}
CLASS_WHITESPACE: Final = {CLASS_WHITESPACE}
CLASS_SPACE: Final = {CLASS_SPACE}
CLASS_NEWLINE: Final = {CLASS_NEWLINE}
CLASS_APOSTROPHE: Final = {CLASS_APOSTROPHE}
CLASS_SURROGATE: Final = {CLASS_SURROGATE}
CLASS_UPPER: Final = {CLASS_UPPER}
CLASS_LOWER: Final = {CLASS_LOWER}
CLASS_ASCII_UPPER: Final = {CLASS_ASCII_UPPER}
CLASS_ASCII_LOWER: Final = {CLASS_ASCII_LOWER}
CLASS_ASCII_PUNCT: Final = {CLASS_ASCII_PUNCT}
CLASS_CONTROL: Final = {CLASS_CONTROL}
CLASS_CJK_LETTER: Final = {CLASS_CJK_LETTER}
CLASS_CJK_MARK: Final = {CLASS_CJK_MARK}
CLASS_CJK_PUNCT: Final = {CLASS_CJK_PUNCT}
CLASS_CJK_UNASSIGNED: Final = {CLASS_CJK_UNASSIGNED}
CLASS_COUNT: Final = {CLASS_COUNT}
LETTER_CLASSES: Final = {LETTER_CLASSES}  # \\p{{L}}
MARK_CLASSES: Final = {MARK_CLASSES}  # \\p{{M}}

'''
    return header + bytes_literal("STAGE1", stage1) + "\n\n" + bytes_literal("STAGE2", stage2) + "\n"


def write_or_check(output: Path, text: str, check: bool, command: str) -> int:
    """Write ``text`` to ``output``, or with ``check`` only compare (1 when stale)."""
    if check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            print(f"{output} is stale: run `{command}`", file=sys.stderr)
            return 1
        print(f"{output} is up to date")
        return 0
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file, write nothing")
    args = parser.parse_args(argv)
    return write_or_check(OUTPUT, render(), args.check, "python -m tables.generate")


if __name__ == "__main__":
    sys.exit(main())
