"""``scanner.latin1_piece_end`` (the encode loop's reading of words, numbers and punctuation from a
text's Latin-1 bytes) gives ``piece_end``'s end wherever it gives one, for every family, at every
position of random texts whose Latin-1 windows are cut anywhere, and gives one for most pieces of
English, JSON, French, German and Spanish; encode of texts read so equals the reference."""

from __future__ import annotations

import random

import pytest

from peek2 import Tokenizer
from peek2.pretokenize import scanner
from peek2.pretokenize.pattern import Peek2Pattern

FAMILIES = ["llama3", "qwen2", "qwen3.5", "o200k", "tekken", "cl100k", "gpt2", "deepseek-v3", "starcoder2"]
# ASCII of every category, every scalar of U+0080..U+00FF (letters of both cases, the Lo letters
# U+00AA and U+00BA that windows leave out, numbers, no-break space, NEL, the soft hyphen, symbols),
# and the scalars beyond Latin-1 that may continue or end a word (a titlecase and a modifier
# letter, a CJK letter, a combining mark, a digit of another script, a curly apostrophe, the long s
# that case-folds to "s").
LATIN1 = [chr(c) for c in range(0x80, 0x100)]
ALPHABET = list("aAzZmsStTdDlLrRvVeE'  \t\n\r0159.,-/_!?\"") + ["ab", "Ab", "AB", "don't", "WE'RE", "'ll", "  x"]
ALPHABET += LATIN1 + ["\u00e9t\u00e9", "\u00c9T\u00c9", "Stra\u00dfe", "\u00a0x", "\u00b2\u00b3", "\u00bfQu\u00e9?"]
BEYOND = ["\u01c5", "\u02b0", "\u4e2d", "\u0301", "\u0663", "\u2019", "\u017f", "\u0100"]
LEFT_OUT = ("\u00aa", "\u00ba")  # (Lo: the windows' bytes never hold them)


def in_window(c: str) -> bool:
    return ord(c) < 0x100 and c not in LEFT_OUT


def random_text(rng: random.Random) -> str:
    parts = [rng.choice(ALPHABET) for _ in range(rng.randrange(1, 40))]
    for _ in range(rng.randrange(0, 4)):
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(BEYOND))
    return "".join(parts)


@pytest.mark.parametrize("family", FAMILIES)
def test_latin1_piece_end_agrees_with_piece_end(family: str) -> None:
    pattern = Peek2Pattern(family)
    stage2, rules = pattern._stage2, pattern._rules
    stage = scanner.latin1_stage(stage2)
    rng = random.Random(f"latin1-{family}")
    given = 0
    for _ in range(3_000):
        text = random_text(rng)
        n = len(text)
        # A window: a run of Latin-1 scalars, cut at random on both sides.
        start = rng.randrange(n)
        while start < n and not in_window(text[start]):
            start += 1
        stop = start
        while stop < n and in_window(text[stop]):
            stop += 1
        if stop == start:
            continue
        offset = rng.randrange(start, stop)
        end = rng.randrange(offset + 1, stop + 1) if rng.random() < 0.5 else stop
        data = text[offset:end].encode("latin-1")
        for i in range(offset, end):
            found = scanner.latin1_piece_end(text, data, offset, i, n, stage, rules)
            if found >= 0:
                given += 1
                assert found == scanner.piece_end(text, i, n, stage2, rules), (family, ascii(text), offset, end, i)
    if scanner.reads_latin1_pieces(rules):
        assert given > 5_000, (family, given)
    else:
        assert given == 0, (family, given)


@pytest.mark.parametrize("family", ["llama3", "o200k"])
def test_most_pieces_of_english_json_and_european_text_are_read_from_bytes(family: str) -> None:
    pattern = Peek2Pattern(family)
    stage = scanner.latin1_stage(pattern._stage2)
    for text in (
        "We're here, and THEY'LL say: the OpenAI API's \"JSONDecoder\" isn't 42 or 3.14 -- it's fine.\n" * 20,
        '{"id": 12345, "name": "x", "tags": [1, 2, 3], "ok": true}\n' * 20,
        "L'\u00e9t\u00e9 dernier, nous sommes all\u00e9s \u00e0 la mer; \u00e7a \u00e9tait tr\u00e8s \u00c9NORME.\n" * 20,
        "Gr\u00fc\u00dfe aus M\u00fcnchen: \u00dcber die Stra\u00dfe gehen wir sch\u00f6n langsam.\n" * 20,
        "\u00bfD\u00f3nde est\u00e1 el ni\u00f1o? \u00a1Aqu\u00ed, en el a\u00f1o 2024!\n" * 20,
    ):
        data = text.encode("latin-1")
        starts = [0] + pattern.split_ends(text)[:-1]
        read = [i for i in starts if scanner.latin1_piece_end(text, data, 0, i, len(text), stage, pattern._rules) >= 0]
        assert len(read) > 0.7 * len(starts), (family, len(read), len(starts))


@pytest.mark.parametrize("name", ["llama3.1", "gpt4o", "qwen3", "deepseek-v3"])
def test_encode_of_latin1_windows_next_to_other_scripts(data_dir, name: str) -> None:  # type: ignore[no-untyped-def]
    """Texts that are not ASCII are read in windows of 4,096 scalars (``LATIN1_WINDOW``) where these
    are Latin-1; a word across a window's end, or followed by a letter beyond Latin-1, is the
    scanner's. Short texts (one window) too."""
    import tokenizers

    path = data_dir / "tokenizers" / name / "tokenizer.json"
    ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    rng = random.Random(name)
    for _ in range(20):
        others = rng.choice([["\u4e2d\u6587"], ["\u4e2d\u6587", "\u2019", "\u0100"], []])
        choices = ["word", "Word", "WORD", "caf", "\u00e9t\u00e9", "na\u00efve", "x", "I'M", "don't", " ", "\n", "4096"] + others
        words = [rng.choice(choices + rng.sample(LATIN1, 3)) for _ in range(rng.choice([3_000, 30]))]
        text = " ".join(words)
        assert ours.encode(text, False) == ref.encode(text, add_special_tokens=False).ids


def test_gpt2_encode_of_latin1_windows_next_to_other_scripts(data_dir) -> None:  # type: ignore[no-untyped-def]
    """The same with GPT-2's files (its pattern: lowercase contractions, a space as the only prefix,
    numbers of any length), against tokenizers' ``ByteLevel(use_regex=true)``."""
    from compliance.reference import reference_and_peek2

    ref, ours = reference_and_peek2(str(data_dir / "tokenizers" / "gpt2" / "encoder.json"))
    rng = random.Random("gpt2")
    for _ in range(20):
        others = rng.choice([["\u4e2d\u6587"], []])
        choices = ["word", "Word", "WORD", "'s", "'S", "'re", "'ll", "'x", "\u00e9t\u00e9", "x", "don't", " ", "\n", "1234567890", "$$", "!?"] + others
        words = [rng.choice(choices + rng.sample(LATIN1, 3)) for _ in range(rng.choice([3_000, 30]))]
        text = " ".join(words)
        assert ours.encode(text, False) == ref.encode(text, add_special_tokens=False).ids
