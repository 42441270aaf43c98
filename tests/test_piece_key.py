"""The piece cache's keys: a packed ("exact") key is the piece itself, so a hit on it is never
compared with the stored piece; a hashed key is confirmed by comparing the piece's code points
packed into words. Two different pieces with the same exact key, or the same hashed key and
words, would give one of them the other's ids, so injectivity is checked here directly, on the
code points where the packings change (block and plane edges, ASCII against an offset in a
block, a code point of 0 against the padding of the last word)."""

from __future__ import annotations

import itertools
import random

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from librt.vecs import vec
from mypy_extensions import i64

from peek2.bpe.piece_cache import CACHE_MAX_CHARS, EXACT_KEY, KEY_WORDS, latin1_key, piece_key, word_count

from conftest import fuzz_examples

EDGES = [
    0x0, 0x20, 0x41, 0x7F, 0x80, 0xC1, 0xFF, 0x100, 0x17F, 0x180,
    0x3FF, 0x400, 0x430, 0x47F, 0x480, 0x4C1,  # Cyrillic, and its 128-blocks' edges
    0x900, 0x941, 0x97F, 0x980,  # Devanagari
    0x4E00, 0x4E41, 0xFF80, 0xFFC1, 0xFFFF,  # the last BMP block
    0x10000, 0x10041, 0x1F600, 0x10FFFF,
]  # fmt: skip


WORDS = vec[i64]([0] * KEY_WORDS)


def key(piece: str) -> int:
    return piece_key(piece, 0, len(piece), WORDS)


def check_injective(pieces: list[str]) -> None:
    """An exact key, or a hashed key with its packed words, is one piece only."""
    seen: dict[tuple[int, ...], str] = {}
    for piece in pieces:
        k = key(piece)
        assert 0 < k < 1 << 63, (piece, k)
        identity = (k,) if k >= EXACT_KEY else (k, *(WORDS[i] for i in range(word_count(k))))
        other = seen.setdefault(identity, piece)
        assert other == piece, f"key {k:#x} of {piece!r} and {other!r}"


def test_exact_keys_injective_on_edge_code_points() -> None:
    # Every piece of 1 to 4 code points over the edge alphabet, and its offsets in other blocks.
    alphabet = [chr(c) for c in EDGES]
    pieces = ["".join(p) for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)]
    pieces += [base + tail for base in ("a" * 7, "a" * 13, "ab\u0400", "\U0001f600" * 5) for tail in ("", "\0", "\0\0")]
    rng = random.Random(7)
    pieces += ["".join(rng.choice(alphabet) for _ in range(rng.randint(4, 24))) for _ in range(100_000)]
    check_injective(pieces)


def test_exact_keys_injective_within_a_script() -> None:
    # Words of one block with an optional ASCII or in-block first character: the block packing.
    rng = random.Random(11)
    pieces = []
    for block in (0x380 >> 7, 0x400 >> 7, 0x480 >> 7, 0x600 >> 7, 0x900 >> 7, 0xE00 >> 7, 0xFF80 >> 7):
        for _ in range(20_000):
            n = rng.randint(3, 8)
            word = "".join(chr(block * 128 + rng.randrange(128)) for _ in range(n))
            first = rng.choice([" ", "'", chr(rng.randrange(128)), chr(block * 128 + rng.randrange(128)), ""])
            pieces.append(first + word)
    check_injective(pieces)


def test_words_of_one_script_get_exact_keys() -> None:
    for piece in (" слово", "λόγος", " كتاب", "नमस्ते", "Hello", "ab", "你好", "a🙂", " however", "\0" * 8, "\x7f" * 8):
        assert key(piece) >= EXACT_KEY, piece


def test_exact_keys_injective_on_eight_ascii_code_points() -> None:
    # 8 code points below 128 (7 bits each, their own packing) against the other exact keys.
    rng = random.Random(13)
    ascii_edges = [chr(c) for c in (0x0, 0x1, 0x20, 0x40, 0x41, 0x61, 0x7E, 0x7F)]
    pieces = ["".join(p) for p in itertools.product(ascii_edges[:4], repeat=8)]
    pieces += ["".join(chr(rng.randrange(128)) for _ in range(8)) for _ in range(50_000)]
    pieces += ["".join(chr(rng.choice(EDGES)) for _ in range(rng.randint(1, 7))) for _ in range(50_000)]
    pieces += ["".join(rng.choice(ascii_edges) for _ in range(rng.randint(1, 7))) for _ in range(50_000)]
    check_injective(list(dict.fromkeys(pieces)))


def test_keys_of_long_pieces_are_hashes() -> None:
    # Beyond what fits in a key, the key is a hash and a hit is confirmed against the piece.
    for piece in ("a" * 9, "é" * 8, "abcdefg\x80", "слово" * 2, "你好世界", "🙂🙂🙂", "x" * CACHE_MAX_CHARS):
        assert 0 < key(piece) < EXACT_KEY, piece


@settings(max_examples=fuzz_examples(2_000), derandomize=True, deadline=None)
@given(st.lists(st.text(st.sampled_from([chr(c) for c in EDGES]), min_size=1, max_size=8), min_size=2, max_size=40))
def test_exact_keys_injective_fuzzed(pieces: list[str]) -> None:
    check_injective(pieces)


@pytest.mark.parametrize("top", [128, 256])
def test_latin1_keys_are_piece_keys(top: int) -> None:
    """``latin1_key`` (a Latin-1 piece keyed from bytes, 8 at a time) gives ``piece_key``'s key and
    words for every length up to CACHE_MAX_CHARS, wherever the piece sits in its window: ASCII
    pieces, and pieces with scalars up to U+00FF (8 of them are hashed unless all are ASCII)."""
    rng = random.Random(f"keys-{top}")
    words = vec[i64]([0] * KEY_WORDS)
    for trial in range(30_000):
        n = trial % CACHE_MAX_CHARS + 1 if trial < 3 * CACHE_MAX_CHARS else rng.randint(1, 12)
        high = rng.random() < 0.3  # (one scalar at most above 127 in some pieces)
        piece = "".join(chr(rng.choice((0, 0x7F, top - 1, rng.randrange(128 if high else top)))) for _ in range(n))
        if high and top > 128:
            at = rng.randrange(n)
            piece = piece[:at] + chr(rng.randrange(128, 256)) + piece[at + 1 :]
        before = "".join(chr(rng.randrange(top)) for _ in range(rng.randint(0, 9)))
        after = "".join(chr(rng.randrange(top)) for _ in range(8 + rng.randint(0, 9)))
        expected = key(piece)
        expected_words = [WORDS[i] for i in range(word_count(expected))] if expected < EXACT_KEY else []
        got = latin1_key((before + piece + after).encode("latin-1"), len(before), n, words)
        assert got == expected, (piece, hex(got), hex(expected))
        assert [words[i] for i in range(len(expected_words))] == expected_words, piece


def test_a_length_class_of_pieces_that_never_come_again_is_cached_sparsely() -> None:
    # (PieceCache.admit: random CJK words, each piece new, cost more to store than to merge again.)
    from peek2.bpe.piece_cache import ADMIT_EPOCH, SPARSE_ADMIT, PieceCache, length_class

    assert [length_class(n) for n in (1, 7, 8, 15, 16, 31, 32, 63, 64, 128)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    cache = PieceCache(1 << 20)
    first = [cache.admit(20) for _ in range(ADMIT_EPOCH - 1)]
    assert all(first)  # every miss cached until the class's first decision
    later = [cache.admit(20) for _ in range(4 * ADMIT_EPOCH)]  # no hit in the epoch: sparse
    assert sum(later) == 4 * ADMIT_EPOCH // SPARSE_ADMIT
    for _ in range(3 * ADMIT_EPOCH):  # another class, whose pieces come again: decided apart
        cache.hit(5)
        assert cache.admit(5)
    assert sum(cache.admit(20) for _ in range(ADMIT_EPOCH)) == ADMIT_EPOCH // SPARSE_ADMIT  # still sparse
    # Pieces that come twice: sparse, about one hit in 15 misses (1 in 1 when every miss is
    # cached). The class comes back (it stayed sparse; a bug hunt), and stays.
    admitted = []
    for k in range(3 * ADMIT_EPOCH):
        if k % 15 == 0:
            cache.hit(20)
        admitted.append(cache.admit(20))
        if admitted[-1] and k >= ADMIT_EPOCH:
            cache.hit(20)  # (once every miss is cached, a hit a miss)
    assert all(admitted[ADMIT_EPOCH:])
    table = PieceCache(100, True)  # the vocabulary's tokens: all stored
    assert all(table.admit(20) for _ in range(4 * ADMIT_EPOCH))
