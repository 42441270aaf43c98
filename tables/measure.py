"""Measure the Unicode version of the reference regex engine against the installed unicodedata2.

``python -m tables.measure`` asks HuggingFace ``tokenizers`` (Oniguruma) which
scalars ``\\p{L}``, ``\\p{N}``, ``\\p{M}`` and ``\\s`` match, and compares each set
with the classes tables/generate.py derives from the installed ``unicodedata2``.
It prints the differences and exits non-zero on any: run it with each candidate
``unicodedata2`` installed to find the version to pin (see generate.py).
"""

from __future__ import annotations

import sys

from tables.generate import (
    CLASS_APOSTROPHE,
    CLASS_ASCII_LOWER,
    CLASS_ASCII_PUNCT,
    CLASS_ASCII_UPPER,
    CLASS_CJK_LETTER,
    CLASS_CJK_PUNCT,
    CLASS_LETTER,
    CLASS_LOWER,
    CLASS_NEWLINE,
    CLASS_NUMBER,
    CLASS_OTHER,
    CLASS_SPACE,
    CLASS_UPPER,
    CLASS_WHITESPACE,
    LETTER_CLASSES,
    MARK_CLASSES,
    MAX_SCALAR,
    scalar_class,
)

PROPERTIES = {
    r"\p{L}": set(LETTER_CLASSES),
    r"[\p{Lu}\p{Lt}]": {CLASS_UPPER, CLASS_ASCII_UPPER},
    r"\p{Ll}": {CLASS_LOWER, CLASS_ASCII_LOWER},
    r"[\p{Lm}\p{Lo}]": {CLASS_LETTER, CLASS_CJK_LETTER},
    r"\p{N}": {CLASS_NUMBER},
    r"\p{M}": set(MARK_CLASSES),
    r"[\p{P}\p{S}]": {CLASS_OTHER, CLASS_ASCII_PUNCT, CLASS_APOSTROPHE, CLASS_CJK_PUNCT},
    r"\s": {CLASS_WHITESPACE, CLASS_SPACE, CLASS_NEWLINE},
}


def reference_members(prop: str, scalars: list[int]) -> set[int]:
    """Scalars matched by ``prop`` in the reference: the complement of what a "removed" split keeps."""
    from tokenizers import Regex, pre_tokenizers

    text = "".join(map(chr, scalars))
    kept = bytearray(len(text))
    for _piece, (start, end) in pre_tokenizers.Split(Regex(prop), behavior="removed").pre_tokenize_str(text):
        kept[start:end] = b"\x01" * (end - start)
    return {scalars[k] for k in range(len(scalars)) if not kept[k]}


def main() -> int:
    import importlib.metadata

    import unicodedata2

    scalars = [cp for cp in range(MAX_SCALAR + 1) if not 0xD800 <= cp <= 0xDFFF]
    print(
        f"tokenizers {importlib.metadata.version('tokenizers')} against unicodedata2 "
        f"{importlib.metadata.version('unicodedata2')} (Unicode {unicodedata2.unidata_version})"
    )
    differences = 0
    for prop, classes in PROPERTIES.items():
        reference = reference_members(prop, scalars)
        ours = {cp for cp in scalars if scalar_class(cp) in classes}
        missing, extra = sorted(reference - ours), sorted(ours - reference)
        differences += len(missing) + len(extra)
        print(f"{prop:17} reference {len(reference):7}  missing {len(missing):5}  extra {len(extra):5}")
        for label, cps in (("missing", missing), ("extra", extra)):
            if cps:
                print(f"    {label}: " + " ".join(f"U+{cp:04X}" for cp in cps[:12]) + (" ..." if len(cps) > 12 else ""))
    print("identical" if not differences else f"{differences} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
