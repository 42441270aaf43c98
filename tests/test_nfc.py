"""peek2.normalize.nfc equals the reference's normalizers.NFC for every scalar, in contexts that exercise
reordering, composition and the scalars newer than the reference's NFC data (tables/nfc.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import unicodedata2
from tokenizers import normalizers

from peek2.normalize.nfc_late import LATE
from peek2.normalize.nfc import nfc
from tables import nfc as generator

# Each context wraps one scalar (written {}): before and after marks of low and high class,
# Hangul jamo, Indic and Kirat Rai vowel signs that compose, and a late mark.
CONTEXTS = [
    "{}", "A{}", "A{}\u0327", "A\u0327{}", "A{}\u0301", "A\u0301{}", "A{}\u05b0", "\u1100{}", "e{}\u0301",
    "{}\u0301", "{}\u0300\u0327", "\u0915{}\u093c", "{}\u093c", "{}\u0bbe", "{}\u0cd5", "{}\u0d3e", "{}\u102e",
    "{}\u1161", "{}\u11a8", "{}\U00016d67", "\U00016d63{}", "{}\U000105c9", "\u0345{}\u0334",
]
# "|" is a starter that composes with nothing, so contexts joined by it normalize independently,
# and one call per block of scalars keeps this fast.
SEPARATOR = "|"


@pytest.mark.slow
@pytest.mark.parametrize("block", range(0, 0x110000, 0x10000), ids=lambda b: f"U+{b:04X}")
def test_every_scalar_in_context(block: int) -> None:
    reference = normalizers.NFC()
    chars = [chr(cp) for cp in range(block, block + 0x10000) if not 0xD800 <= cp <= 0xDFFF]
    text = SEPARATOR.join(context.format(char) for char in chars for context in CONTEXTS)
    expected = reference.normalize_str(text)
    got = nfc(text)
    if got != expected:  # name the first context that differs
        for char in chars:
            for context in CONTEXTS:
                sample = context.format(char)
                assert nfc(sample) == reference.normalize_str(sample), f"U+{ord(char):04X} in {ascii(sample)}"
    assert got == expected


def test_late_scalars_are_barriers() -> None:
    # Unicode 16 NFC would move U+0327 (class 202) after U+07FD (class 220) and compose
    # "A" + U+0301 across it; the reference leaves the late scalar as an inert starter.
    text = "A\u07fd\u0327\u0301e\u0301"
    assert nfc(text) == normalizers.NFC().normalize_str(text) == "A\u07fd\u0327\u0301\u00e9"
    assert nfc("e\u0301") == "\u00e9" and nfc("abc") == "abc" and nfc("") == ""


def test_regenerated_late_table_is_identical() -> None:
    assert generator.OUTPUT.read_text(encoding="utf-8") == generator.render()
    assert len(LATE) < 1000


@pytest.mark.slow
def test_offsets_through_nfc_for_every_active_scalar(data_dir: Path) -> None:
    """Qwen2 offsets (peek2 aligns through its NFC like the reference) for every scalar that NFC
    decomposes, reorders or composes, in contexts that move marks around it."""
    from tokenizers import Tokenizer as Reference

    from peek2.tokenizer import Tokenizer

    path = data_dir / "tokenizers" / "qwen2" / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    active = [
        chr(cp)
        for cp in range(0x110000)
        if not 0xD800 <= cp <= 0xDFFF
        and (unicodedata2.combining(chr(cp)) or unicodedata2.decomposition(chr(cp)) or 0xAC00 <= cp <= 0xD7A3)
    ]
    for char in active:
        for context in ("{}", "A{}\u0327\u0301 x", "e\u0301{}\u0308y", "\u1100{}\u11a8"):
            text = context.format(char)
            expected = reference.encode(text, add_special_tokens=False)
            got = ours.encode_with_offsets(text, False)
            assert (got.ids, got.offsets) == (expected.ids, expected.offsets), f"U+{ord(char):04X} in {ascii(text)}"


def test_the_class_nfc_may_not_cut_before_agrees_with_the_rule() -> None:
    """``not_boundary_end`` finds a long run of marks with a generated character class; it must be
    the rule NFC cuts by (``_boundary``) for every scalar but the LATE ones (cut out before)."""
    from peek2.normalize import nfc as module

    for cp in range(0x110000):
        char = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or char in LATE:
            continue
        assert (module.not_boundary_end(char, 0) == 1) == (not module._boundary(char)), f"U+{cp:04X}"


def test_runs_of_marks_in_or_out_of_order_and_decomposable() -> None:
    """Long stretches NFC may not cut (more than CHUNK scalars): in canonical order they take one C
    call, out of order a sort; both as the reference normalizes them, decompositions included."""
    import random

    reference = normalizers.NFC()
    heads = ["e", "a", "\u00e9", "\u1e17", "\u212b", "\u1100", "\uac00", "\u0915", "\u0f40", "\u01d5"]
    marks = ["\u0301", "\u0300", "\u0323", "\u0327", "\u0308", "\u0344", "\u0340", "\u0343", "\u0f71",
             "\u0f72", "\u0f73", "\u0f75", "\u0f81", "\u093c", "\u1161", "\u11a8", "\u05b0", "\u0345"]
    rng = random.Random(5)
    for _ in range(400):
        body = [rng.choice(marks[:4]) if rng.random() < 0.5 else rng.choice(marks) for _ in range(rng.randint(250, 900))]
        if rng.random() < 0.5:
            body.sort(key=unicodedata2.combining)  # canonical order: the one-call path
        text = rng.choice(heads) + "".join(body) + rng.choice(["", " ", "x\u0301"])
        assert nfc(text) == reference.normalize_str(text), ascii(text[:60])


def test_the_classes_of_marks_and_of_where_nfc_may_change_text_agree_with_the_rule() -> None:
    """``MARK_CLASS`` (jumped over by a stream's walk back to a cut) holds exactly the scalars of a
    combining class other than 0; outside ``CHANGED_NEAR_CLASS`` (passed in C by the offsets' NFC),
    a scalar is one NFC may cut before and leaves alone; LATE scalars aside (cut out before)."""
    import re

    from peek2.normalize import nfc as module
    from peek2.normalize.nfc_late import CHANGED_NEAR_CLASS, MARK_CLASS

    mark = re.compile(f"[{MARK_CLASS}]")
    changed_near = re.compile(f"[{CHANGED_NEAR_CLASS}]")
    for cp in range(0x110000):
        char = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or char in LATE:
            continue
        assert bool(mark.match(char)) == bool(unicodedata2.combining(char)), f"U+{cp:04X}"
        if not changed_near.match(char):
            assert module._boundary(char) and unicodedata2.normalize("NFC", char) == char, f"U+{cp:04X}"


def test_offsets_of_many_distinct_characters_and_one_nfc_changes(data_dir: Path) -> None:
    """A bug hunt: Qwen3's offsets of 40,000 random CJK ideographs after one U+212B (which NFC
    changes) took 0.36x tokenizers' time (random Hangul 0.30x): every character was a cluster looked
    up in a memo of 8,192 that the text's distinct characters kept emptying. Stretches NFC leaves
    alone are now passed in C, and the one change costs little."""
    import random

    from tokenizers import Tokenizer as Reference

    from peek2.tokenizer import Tokenizer
    from scaling import paired_ratio

    path = data_dir / "tokenizers" / "qwen3" / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    rng = random.Random(11)
    body = "".join(chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(40_000))
    changed = "\u212b" + body
    expected = reference.encode(changed, add_special_tokens=False)
    got = ours.encode_with_offsets(changed, False)
    assert (got.ids, got.offsets) == (expected.ids, expected.offsets)
    assert paired_ratio(lambda: ours.encode_with_offsets(body, False), lambda: ours.encode_with_offsets(changed, False)) < 2


def test_late_scalars_are_found_where_they_are() -> None:
    """``nfc`` finds the scalars the reference's Unicode 9.0 lacks with a compiled bitmap
    (``ScalarSet``), not a frozenset over the text's strs (a third of Qwen3's encode of an English
    text holding one curly quote): each one, at any place, in any company, as the set says."""
    import random

    from peek2.normalize.nfc_late import LATE
    from peek2.normalize.scalar_set import ScalarSet

    late = ScalarSet(LATE)
    lows = sorted(LATE)
    rng = random.Random(9)
    around = [chr(ord(lows[0]) - 1), chr(ord(lows[-1]) + 1), "a", "\u00e9", "\u2019", "\u4e2d", "\U0001f600", "e\u0301"]
    for _ in range(2_000):
        parts = [rng.choice(around + lows) if rng.random() < 0.2 else rng.choice(around) for _ in range(rng.randrange(0, 30))]
        text = "".join(parts)
        start = rng.randrange(len(text) + 1)
        expected = next((k for k in range(start, len(text)) if text[k] in LATE), -1)
        assert late.first_in(text, start) == expected, (ascii(text), start)
    assert ScalarSet(frozenset()).first_in("abc\U0010ffff", 0) == -1


def test_scalars_are_found_across_latin1_windows() -> None:
    """A set with no Latin-1 scalar passes over windows of Latin-1 text whole (``LATIN1_WINDOW``):
    a member is still found at any place, near a window's edges, after scalars beyond Latin-1 that
    are not members, from any start."""
    import random

    from peek2.normalize.nfc import inert_scalars
    from peek2.normalize.scalar_set import LATIN1_WINDOW, ScalarSet

    rng = random.Random(10)
    for members in (inert_scalars(), ScalarSet(frozenset("\u0301\u2126")), ScalarSet(frozenset("\u00e9\u0301"))):
        for _ in range(300):
            n = rng.choice([10, LATIN1_WINDOW - 1, LATIN1_WINDOW, 3 * LATIN1_WINDOW + 5])
            chars = [rng.choice("ab \u00e9\u00ff\n") for _ in range(n)]
            for _ in range(rng.randrange(0, 4)):
                at = min(n - 1, rng.choice([rng.randrange(n), LATIN1_WINDOW, LATIN1_WINDOW - 1, 2 * LATIN1_WINDOW, n - 1]))
                chars[at] = rng.choice(["\u0301", "\u2126", "\u2019", "\u4e2d", "\U0001f600", "\u00e9"])
            text = "".join(chars)
            start = rng.choice([0, rng.randrange(n), LATIN1_WINDOW - 2 if n > LATIN1_WINDOW else 0])
            expected = next((k for k in range(start, n) if members.first_in(text[k], 0) == 0), -1)
            assert members.first_in(text, start) == expected, (n, start)
