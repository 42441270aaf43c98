"""``scanner.ascii_piece_end`` (the encode loop's reading of words, numbers and punctuation from a
text's ASCII bytes) gives ``piece_end``'s end wherever it gives one, for every family, at every
position of random texts whose ASCII windows are cut anywhere, and gives one for most pieces of
English and JSON."""

from __future__ import annotations

import random

import pytest

from peek2 import Tokenizer
from peek2.pretokenize import scanner
from peek2.pretokenize.pattern import Peek2Pattern

FAMILIES = ["llama3", "qwen2", "qwen3.5", "o200k", "tekken", "cl100k", "gpt2", "deepseek-v3", "starcoder2"]
# ASCII of every category, and the scalars beyond it that may continue or end an ASCII word
# (a lowercase and a capital letter with accents, a titlecase and a modifier letter, a CJK
# letter, a combining mark, a no-break space, a digit of another script).
ALPHABET = list("aAzZmsStTdDlLrRvVeE'  \t\n\r0159.,-/_!?\"") + ["ab", "Ab", "AB", "don't", "WE'RE", "'ll", "  x"]
BEYOND = ["\u00e9", "\u00c9", "\u01c5", "\u02b0", "\u4e2d", "\u0301", "\u00a0", "\u0663", "\u2019"]


def random_text(rng: random.Random) -> str:
    parts = [rng.choice(ALPHABET) for _ in range(rng.randrange(1, 40))]
    for _ in range(rng.randrange(0, 4)):
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(BEYOND))
    return "".join(parts)


@pytest.mark.parametrize("family", FAMILIES)
def test_ascii_piece_end_agrees_with_piece_end(family: str) -> None:
    pattern = Peek2Pattern(family)
    stage2, rules = pattern._stage2, pattern._rules
    rng = random.Random(f"ascii-{family}")
    given = 0
    for _ in range(3_000):
        text = random_text(rng)
        n = len(text)
        # An ASCII window: a run of ASCII scalars, cut at random on both sides.
        start = rng.randrange(n)
        while start < n and not text[start].isascii():
            start += 1
        stop = start
        while stop < n and text[stop].isascii():
            stop += 1
        if stop == start:
            continue
        offset = rng.randrange(start, stop)
        end = rng.randrange(offset + 1, stop + 1) if rng.random() < 0.5 else stop
        data = text[offset:end].encode("ascii")
        for i in range(offset, end):
            found = scanner.ascii_piece_end(text, data, offset, i, n, stage2, rules)
            if found >= 0:
                given += 1
                assert found == scanner.piece_end(text, i, n, stage2, rules), (family, ascii(text), offset, end, i)
    if scanner.reads_ascii_pieces(rules):
        assert given > 5_000, (family, given)
    else:
        assert given == 0, (family, given)


@pytest.mark.parametrize("family", ["llama3", "o200k"])
def test_most_pieces_of_english_and_json_are_read_from_bytes(family: str) -> None:
    pattern = Peek2Pattern(family)
    stage2, rules = pattern._stage2, pattern._rules
    for text in (
        "We're here, and THEY'LL say: the OpenAI API's \"JSONDecoder\" isn't 42 or 3.14 -- it's fine.\n" * 20,
        '{"id": 12345, "name": "x", "tags": [1, 2, 3], "ok": true}\n' * 20,
    ):
        data = text.encode("ascii")
        starts = [0] + pattern.split_ends(text)[:-1]
        read = [i for i in starts if scanner.ascii_piece_end(text, data, 0, i, len(text), stage2, rules) >= 0]
        assert len(read) > 0.7 * len(starts), (family, len(read), len(starts))


@pytest.mark.parametrize("name", ["llama3.1", "gpt4o", "qwen3"])
def test_encode_of_ascii_windows_next_to_other_scripts(data_dir, name: str) -> None:  # type: ignore[no-untyped-def]
    """Long texts that are not ASCII are read in windows of 4,096 scalars (``ASCII_WINDOW``); a word
    across a window's end, or followed by a letter beyond ASCII, is the scanner's."""
    import tokenizers

    path = data_dir / "tokenizers" / name / "tokenizer.json"
    ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    rng = random.Random(name)
    for _ in range(20):
        words = [rng.choice(["word", "Word", "WORD", "caf", "\u00e9t\u00e9", "na\u00efve", "x", "I'M", "don't", " ", "\n", "4096", "\u4e2d\u6587"]) for _ in range(3_000)]
        text = " ".join(words)
        assert ours.encode(text, False) == ref.encode(text, add_special_tokens=False).ids


def test_gpt2_encode_of_ascii_windows_next_to_other_scripts(data_dir) -> None:  # type: ignore[no-untyped-def]
    """The same with GPT-2's files (its pattern: lowercase contractions, a space as the only prefix,
    numbers of any length), against tokenizers' ``ByteLevel(use_regex=true)``."""
    from compliance.reference import reference_and_peek2

    ref, ours = reference_and_peek2(str(data_dir / "tokenizers" / "gpt2" / "encoder.json"))
    rng = random.Random("gpt2")
    for _ in range(20):
        words = [rng.choice(["word", "Word", "WORD", "'s", "'S", "'re", "'ll", "'x", "\u00e9t\u00e9", "x", "don't", " ", "\n", "1234567890", "$$", "!?", "\u4e2d\u6587"]) for _ in range(3_000)]
        text = " ".join(words)
        assert ours.encode(text, False) == ref.encode(text, add_special_tokens=False).ids
