"""The merge table and the filters (peek2.bpe.merger): every merge that can apply found, non-merges
refused; the pairs left out change no id; huge pages change nothing.

The filter answers "no merge" for most pairs without reading the merge table, so a pair it
wrongly refused would silently change ids. Here every merge of the real vocabularies that can
apply (computed here, independently of ``final_pairs``) is looked up through ``_pair_value``
(filter, pair cache, table), and random pairs are checked against it. The pairs the table leaves
out are checked to change nothing against tokenizers, on vocabularies built to have many
(every split of each token listed, ranks shuffled).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from librt.vecs import vec
from mypy_extensions import i64

from tokenizers import Tokenizer as Reference
import peek2
from peek2.bpe import huge_pages, merge_table, merger, piece_cache
from peek2.tokenizer import Tokenizer
from tests.scaling import growth
from tests.vocabularies import byte_level_file, chars

MODELS = ["llama3.1", "qwen2"]


@pytest.fixture(scope="module", params=MODELS)
def tok(request: pytest.FixtureRequest, data_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(data_dir / "tokenizers" / request.param / "tokenizer.json")


def last_merge(token: bytes, ranks: dict[tuple[bytes, bytes], int]) -> tuple[bytes, bytes] | None:
    """The pair whose merge makes ``token`` when its bytes are merged alone, lowest rank then
    leftmost first (None if they do not end as ``token``)."""
    parts = [token[k : k + 1] for k in range(len(token))]
    last = None
    while len(parts) > 1:
        found = [(ranks[pair], k) for k, pair in enumerate(zip(parts, parts[1:])) if pair in ranks]
        if not found:
            return None
        _, k = min(found)
        last = (parts[k], parts[k + 1])
        parts[k : k + 2] = [parts[k] + parts[k + 1]]
    return last


def expected_merges(tok: Tokenizer) -> dict[int, int]:
    """Pair key -> merge value, from the spec's merge list (a later duplicate wins, as in the
    reference), of the pairs that can apply: a token made by several pairs keeps the last merge of
    its own bytes (see ``peek2.bpe.merge_table.final_pairs`` for why the others never apply)."""
    vocab = tok.spec.vocab
    ranks = {pair: rank for rank, pair in enumerate(tok.spec.merges)}
    makers = Counter(left + right for left, right in ranks)
    return {
        vocab[left] * merge_table.PAIR_STRIDE + vocab[right]: (rank << merge_table.ID_BITS) | vocab[left + right]
        for (left, right), rank in ranks.items()
        if makers[left + right] == 1 or last_merge(left + right, ranks) == (left, right)
    }


def test_only_pairs_that_can_apply_are_kept(tok: Tokenizer) -> None:
    table = tok._engine.merges
    expected = expected_merges(tok)
    assert (table.mask + 1) * 2 == len(table.table)
    kept = sum(1 for k in range(0, len(table.table), 2) if table.table[k] != 0)
    assert kept == len(expected)
    if tok.spec.source.endswith("llama3.1/tokenizer.json"):  # every two-token split of each token
        assert len(tok.spec.merges) == 280_147 and kept < 130_000


def fresh_pair_cache() -> vec[i64]:
    return vec[i64]([0] * (2 * (merger.PAIR_CACHE_MASK + 1)))


def test_every_merge_passes_the_filter(tok: Tokenizer) -> None:
    merges = tok._engine.merges
    pairs = fresh_pair_cache()
    wrong = []
    for key, value in expected_merges(tok).items():
        left, right = divmod(key, merge_table.PAIR_STRIDE)
        if merger._pair_value(left, right, merges, pairs) != value or merges.get(key) != value:
            wrong.append((left, right))
    assert not wrong, f"{len(wrong)} merges not found, first {wrong[:5]}"


def test_pairs_that_do_not_merge(tok: Tokenizer) -> None:
    merges = tok._engine.merges
    expected = expected_merges(tok)
    pairs = fresh_pair_cache()
    rng = random.Random(7)
    top = max(tok.spec.vocab.values()) + 1
    passed = 0
    for _ in range(100_000):
        left, right = rng.randrange(top), rng.randrange(top)
        value = expected.get(left * merge_table.PAIR_STRIDE + right, merge_table.NO_MERGE)
        assert merger._pair_value(left, right, merges, pairs) == value
        word, bits = merge_table.filter_word_bits(left * merge_table.PAIR_STRIDE + right + 1, merges.filter_mask)
        passed += value == merge_table.NO_MERGE and (merges.filter[word] & bits) == bits
    assert passed < 10_000  # the filter refuses most non-merges (about 5% pass)


@pytest.mark.parametrize("model", ["llama3", "llama3.1"])  # the files with ignore_merges
def test_every_token_passes_the_token_filter(model: str, data_dir: Path) -> None:
    tok = Tokenizer.from_file(data_dir / "tokenizers" / model / "tokenizer.json")
    engine = tok._engine
    assert engine.ignore_merges
    words = vec[i64]([0] * piece_cache.KEY_WORDS)
    token_filter = engine.token_filter
    missing = []
    for token, token_id in engine.whole_tokens.items():
        if 0 < len(token) <= piece_cache.CACHE_MAX_CHARS:
            word, bits = merge_table.filter_word_bits(merge_table.fold_key(piece_cache.piece_key(token, 0, len(token), words)), len(token_filter) - 1)
            if token_filter[word] & bits != bits:
                missing.append(token)
    assert not missing, f"{len(missing)} tokens refused by the filter, first {missing[:5]}"
    # And a piece that is a token comes out as that token.
    assert tok.encode(" Hello", add_special_tokens=False) == [engine.whole_tokens[" Hello"]]


def every_split_vocabulary(rng: random.Random) -> tuple[str, int]:
    """A byte-level tokenizer.json of random substrings of a random text, whose merges list every
    split of each token into two tokens (as converters of tiktoken files write them), in an order
    that is only roughly by length; and the number of those merges."""
    alphabet = "abcd é中"
    text = "".join(rng.choice(alphabet) for _ in range(300)).encode("utf-8")
    tokens = {bytes([b]) for b in range(256)}
    while len(tokens) < 256 + 120:
        start = rng.randrange(len(text) - 1)
        tokens.add(text[start : start + rng.randint(2, 7)])
    merges = []
    for token in sorted(tokens, key=lambda t: (len(t) + rng.random() * 3, t)):
        splits = [(token[:k], token[k:]) for k in range(1, len(token)) if token[:k] in tokens and token[k:] in tokens]
        rng.shuffle(splits)
        merges.extend(splits)
    return byte_level_file(sorted(tokens - {bytes([b]) for b in range(256)}, key=lambda t: (len(t), t)), merges), len(merges)


def test_pairs_left_out_change_no_id() -> None:
    rng = random.Random(13)
    left_out = 0
    for _ in range(40):
        json_text, count = every_split_vocabulary(rng)
        tok, reference = Tokenizer.from_str(json_text), Reference.from_str(json_text)
        left_out += count - len(expected_merges(tok))
        assert set(expected_merges(tok).values()) == {
            tok._engine.merges.table[k + 1] for k in range(0, len(tok._engine.merges.table), 2) if tok._engine.merges.table[k]
        }
        for _ in range(40):  # pieces of up to 400 bytes: the short merge and the heap
            text = "".join(rng.choice("abcd é中") for _ in range(rng.choice((5, 20, 150))))
            assert tok.encode(text, False) == reference.encode(text, add_special_tokens=False).ids, ascii(text)
    assert left_out > 400  # (522 of these files' merges never apply)


def test_pieces_that_are_tokens() -> None:
    """Without ignore_merges a piece that is a token is looked up only if its bytes merge into
    that token (all but ``not_self_merging``): the others merge, as tokenizers does."""
    rng = random.Random(17)
    not_self = listed = 0
    for _ in range(30):
        json_text, _ = every_split_vocabulary(rng)
        tok, reference = Tokenizer.from_str(json_text), Reference.from_str(json_text)
        assert tok._engine.token_lookup and not tok._engine.ignore_merges
        for token in tok._engine.whole_tokens:
            if peek2.split(token, "llama3") != [token]:
                continue  # not a piece of its own
            expected = reference.encode(token, add_special_tokens=False).ids
            assert tok.encode(token, False) == expected, ascii(token)
            not_self += len(expected) > 1
            listed += len(expected) == 1
    assert not_self > 50 and listed > 1000  # both kinds of token were met as pieces


def test_vocabulary_with_an_unknown_byte_keeps_every_pair() -> None:
    """Where some bytes have no token (an ``unk_token`` stands for them), a token's bytes alone are
    not the symbols it is made of in a text: no pair is left out, no piece looked up as a token,
    and the ids stay tokenizers'."""
    rng = random.Random(5)
    json_text, _ = every_split_vocabulary(rng)
    loaded = json.loads(json_text)
    vocab = loaded["model"]["vocab"]
    for byte in [*range(0x20), ord("x")]:
        del vocab[chars(bytes([byte]))]
    vocab["<unk>"] = max(vocab.values()) + 1
    loaded["model"]["unk_token"] = "<unk>"
    loaded["model"]["merges"] = [m for m in loaded["model"]["merges"] if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    json_text = json.dumps(loaded)
    tok, reference = Tokenizer.from_str(json_text), Reference.from_str(json_text)
    assert not tok._engine.token_lookup
    kept = sum(1 for k in range(0, len(tok._engine.merges.table), 2) if tok._engine.merges.table[k])
    assert kept == len(loaded["model"]["merges"])
    for _ in range(2000):
        text = "".join(rng.choice("abcd é中x\t\x01") for _ in range(rng.randint(1, 40)))
        assert tok.encode(text, False) == reference.encode(text, add_special_tokens=False).ids, ascii(text)


def test_filter_bits_cover_all_64_positions() -> None:
    assert [merge_table._bit(k) for k in range(64)] == [1 << k for k in range(63)] + [-(1 << 63)]


def test_huge_pages_keep_the_ids(tok: Tokenizer) -> None:
    text = "Hello world, 漢字かなカナ 한국어 ไทย العربية हिन्दी 12345 " * 50
    before = tok.encode(text)
    advised = huge_pages.advise(tok._engine.tables())
    assert advised >= 0 and advised % huge_pages.HUGE_PAGE == 0
    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if setting.exists() and "[never]" not in setting.read_text() and os.environ.get(huge_pages.ENV_SWITCH, "1") != "0":
        assert advised > 0  # the kernel has transparent huge pages and takes the advice
    assert tok.encode(text) == before


def test_a_fork_waits_for_the_collapse_of_the_tables(data_dir: Path) -> None:
    """The tables are collapsed into huge pages by a thread, so that a load does not wait for it
    (about 50 ms of a load of Qwen3's file); a fork just after a load waits for that thread, so
    that the child starts with the tables collapsed and the parent forks with no thread of
    peek2 running (Python 3.12 warns of a fork in a process with threads). Before, the thread
    was still running in the parent's fork, as it is when nothing waits for it."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    path = data_dir / "tokenizers" / "qwen3" / "tokenizer.json"
    code = f"""
import os, threading
from peek2 import Tokenizer
tok = Tokenizer.from_file({str(path)!r})
pid = os.fork()
if pid == 0:
    os._exit(0 if tok.encode("Hello world") == [9707, 1879] else 3)
running = [t.name for t in threading.enumerate() if t.name == "peek2-huge-pages"]
_, status = os.waitpid(pid, 0)
print(running, os.waitstatus_to_exitcode(status))
"""
    env = {**os.environ, "PEEK2_CACHE": "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["[]", "0"], result.stdout + result.stderr


def test_a_load_goes_on_where_no_thread_can_start(tok: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ulimit -v a thread's stack may not be had: the load failed with "can't start new
    thread" (a bug hunt); the collapse is then left to the kernel's khugepaged."""
    import threading

    def no_thread(self: object) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    assert huge_pages.advise(tok._engine.tables()) >= 0
    huge_pages.wait()


def test_huge_pages_can_be_turned_off(data_dir: Path) -> None:
    code = "from peek2.bpe import huge_pages; from librt.vecs import vec; from mypy_extensions import i64; print(huge_pages.advise([vec[i64]([0] * 1_000_000)]))"
    env = {**os.environ, huge_pages.ENV_SWITCH: "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "0"


def test_huge_pages_refuse_objects_without_a_buffer() -> None:
    with pytest.raises(TypeError, match="bytes-like|buffer"):
        huge_pages.advise([object()])


@pytest.mark.parametrize("model", ["llama3.2", "qwen3", "gpt4o"])
def test_pieces_around_the_block_limit_merge_as_tokenizers(data_dir: Path, model: str) -> None:
    """Pieces of fewer than HEAP_MIN_BYTES symbols merge with block minima, longer ones with the
    heap: both must give the reference's ids, at the limit and on either side of it (the limit
    went from 256 to 2048 symbols, where block minima stay faster than the heap: a bug hunt
    measured words of 256 bytes and more at 0.67-0.85x tiktoken; then to 4096, and to 65,537
    with a tree of minima, whose levels change at 256, 4,097 and 32,769 symbols; then to 131,073:
    every piece that ``long_pieces`` does not cut)."""
    path = data_dir / "tokenizers" / model / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    limit = merger.HEAP_MIN_BYTES
    rng = random.Random(limit)
    tokens = [t for t in reference.get_vocab() if t.isalpha() and t.isascii() and t.islower()]
    for length in (limit // 8, 255, 256, 257, 4097, 32769, 65536, 65537, limit - 1, limit, limit + 1, 2 * limit + 3):
        for alphabet in ("ab", "acgt", "abcdefghijklmnopqrstuvwxyz"):
            word = "".join(rng.choice(alphabet) for _ in range(length))
            words = [word, "x" + "".join(rng.choice(tokens) for _ in range(length // 3))[: length - 1]]
            for text in words:
                ours._engine.cache.clear()
                assert ours.encode(text, add_special_tokens=False) == reference.encode(text, add_special_tokens=False).ids, (length, text[:40])
        cjk = "".join(chr(rng.randrange(0x4E00, 0x9FA0)) for _ in range(length // 2))  # (whole characters: one symbol each)
        assert ours.encode(cjk, add_special_tokens=False) == reference.encode(cjk, add_special_tokens=False).ids, length


@pytest.mark.parametrize("character", ["=", " ", "a", "\u00e9"])
def test_runs_across_the_old_heap_limit_are_linear(tok: Tokenizer, character: str) -> None:
    """A piece of 64K-128K bytes went to the heap, at 2.6x a byte what the blocks cost: 80,000
    "=" took 15 ms where 40,000 took 2.3 and 160,000 (cut by ``long_pieces``) 9 ms, so 4x the
    text from 30,000 cost 10-14x the time (a bug hunt saw 6.3-6.7x from 40,000). Every piece
    up to LONG_PIECE_BYTES now merges in the blocks: about 4x."""
    assert merger.HEAP_MIN_BYTES > merger.LONG_PIECE_BYTES
    assert growth(lambda n: character * n, tok.encode, 30_000) < 6
    assert growth(lambda n: character * n, tok.encode_with_offsets, 30_000) < 6


@pytest.mark.parametrize("character", ["\u00e9", "\u4e2d", "\u0436"])
def test_runs_of_multibyte_characters_across_the_long_piece_limit_are_linear(tok: Tokenizer, character: str) -> None:
    """A piece of more than 131,072 characters goes to ``long_pieces``, whose blocks merged their
    bytes one by one, where the merger starts a character whose token stands for its bytes as
    that token: 131,073 "é" cost 2.75x 131,072, and 4x the text from 40,000 cost 8-18x the time
    (a bug hunt). The blocks now merge whole characters too: about 4-5x."""
    assert growth(lambda n: character * n, tok.encode, 40_000) < 6.5
    assert growth(lambda n: character * n, tok.count, 40_000) < 6.5


@pytest.mark.parametrize("model", ["llama3.1", "qwen2", "deepseek-v3"])
def test_long_pieces_of_whole_characters_merge_as_tokenizers(data_dir: Path, model: str) -> None:
    """The blocks of ``long_pieces`` (pieces of more than 131,072 characters, or of as many
    symbols) merge whole characters as text: the reference's ids on runs of characters of 2, 3
    and 4 bytes and random CJK, past both limits."""
    path = data_dir / "tokenizers" / model / "tokenizer.json"
    ours, reference = Tokenizer.from_file(path), Reference.from_file(str(path))
    rng = random.Random(model)
    cjk = "".join(chr(rng.randrange(0x4E00, 0x9FA0)) for _ in range(merger.LONG_PIECE_BYTES // 2))
    for text in ("\u00e9" * (merger.LONG_PIECE_BYTES + 7), "\u4e2d\u6587" * 70_000, "\U0001f600" * 140_000, cjk, "a" + "\u00e9" * 140_000):
        expected = reference.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, add_special_tokens=False) == expected, ascii(text[:8])
        assert ours.count(text, add_special_tokens=False) == len(expected)


def test_long_tokens_merge_alone_through_a_heap_as_the_scan_does(data_dir: Path) -> None:
    """``final_pairs`` merges each token's bytes alone: by a scan, quadratic in the token's length
    (a file with one token of 200,000 characters took 23 s to load; a bug hunt), so a token longer
    than ``ALONE_SCAN_MAX`` bytes merges through a heap. Both give the same token and last pair,
    at every length, on text, on runs of one byte and on pairs repeated; and the load grows
    linearly with such a token."""
    from peek2.bpe.engine_tables import _byte_ids

    tok = Tokenizer.from_file(data_dir / "tokenizers" / "llama3.2" / "tokenizer.json")
    byte_ids, merges = _byte_ids(tok.spec), tok._engine.merges
    tokens = [t for t in tok.spec.vocab if len(t) > 1]
    rng = random.Random(21)
    for n in (2, 3, 7, 40, 255, 256, 257, 600, 2000):
        for kind in range(6):
            if kind == 0:
                data = b"".join(rng.choice(tokens) for _ in range(n))[:n]
            elif kind == 1:
                data = rng.choice(tokens)[:1] * n
            elif kind == 2:
                data = (b"ab" * n)[:n]
            elif kind == 3:
                data = rng.choice(tokens) * 3
            elif kind == 4:
                data = bytes(rng.randrange(256) for _ in range(n))
            else:
                data = " ".join(rng.choice(["the", "cat", "==", "\u4e2d\u6587", "1234"]) for _ in range(n)).encode()[:n]
            scan, heap = merge_table.MergeAlone(), merge_table.MergeAlone()
            merged = merge_table._merge_alone_scan(data, byte_ids, merges, scan)
            assert merge_table._merge_alone_heap(data, byte_ids, merges, heap) == merged, (n, kind, data[:40])
            assert heap.last == scan.last, (n, kind, data[:40])
    # One long token in a small file, made by a chain of doublings: the load grows linearly.
    def file_with_a_long_token(size: int) -> str:
        pieces, merges_list = [b"ab"], [(b"a", b"b")]
        while len(pieces[-1]) * 2 <= size:
            merges_list.append((pieces[-1], pieces[-1]))
            pieces.append(pieces[-1] * 2)
        return byte_level_file([b"ab" * (size // 2)], merges_list)

    assert growth(file_with_a_long_token, lambda text: Tokenizer.from_str(text, cache_size=0), 20_000) < 8


def test_utf8_length_counts_long_and_short_ranges_alike() -> None:
    """``_utf8_length`` encodes a range of more than 512 characters in C and counts a shorter one
    scalar by scalar: both give the UTF-8 length, a lone surrogate counting 3 bytes."""
    rng = random.Random(8)
    alphabet = ["a", "\u00e9", "\u4e2d", "\U0001f600", "\ud800", "\udfff", " "]
    for size in (0, 1, 511, 512, 513, 2000):
        text = "".join(rng.choice(alphabet) for _ in range(size + 20))
        for start, end in ((0, size), (7, size + 20), (3, size + 3)):
            expected = sum(1 if c < "\x80" else 2 if c < "\u0800" else 3 if c < "\U00010000" else 4 for c in text[start:end])
            assert merger._utf8_length(text, start, end) == expected, (size, start, end)
