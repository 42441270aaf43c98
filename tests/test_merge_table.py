"""The merge table and the filters (peek2.bpe.merger): every merge and token found, non-merges refused; huge pages change nothing.

The filter answers "no merge" for most pairs without reading the merge table, so a pair it
wrongly refused would silently change ids. Here every merge of the real vocabularies is looked
up through ``_pair_value`` (filter, pair cache, table), and random pairs are checked against
the vocabulary's own merge list.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from librt.vecs import vec
from mypy_extensions import i64

from peek2.bpe import merger
from peek2.bpe import huge_pages
from peek2.tokenizer import Tokenizer

MODELS = ["llama3.1", "qwen2"]


@pytest.fixture(scope="module", params=MODELS)
def tok(request: pytest.FixtureRequest, data_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(data_dir / "tokenizers" / request.param / "tokenizer.json")


def expected_merges(tok: Tokenizer) -> dict[int, int]:
    """Pair key -> merge value, from the spec's merge list (a later duplicate wins, as in the reference)."""
    vocab = tok.spec.vocab
    return {
        vocab[left] * merger.PAIR_STRIDE + vocab[right]: (rank << merger.ID_BITS) | vocab[left + right]
        for rank, (left, right) in enumerate(tok.spec.merges)
    }


def fresh_pair_cache() -> vec[i64]:
    return vec[i64]([0] * (2 * (merger.PAIR_CACHE_MASK + 1)))


def test_every_merge_passes_the_filter(tok: Tokenizer) -> None:
    merges = tok._engine.merges
    pairs = fresh_pair_cache()
    wrong = []
    for key, value in expected_merges(tok).items():
        left, right = divmod(key, merger.PAIR_STRIDE)
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
        value = expected.get(left * merger.PAIR_STRIDE + right, merger.NO_MERGE)
        assert merger._pair_value(left, right, merges, pairs) == value
        word, bits = merger._filter_word_bits(left * merger.PAIR_STRIDE + right + 1, merges.filter_mask)
        passed += value == merger.NO_MERGE and (merges.filter[word] & bits) == bits
    assert passed < 10_000  # the filter refuses most non-merges (about 5% pass)


@pytest.mark.parametrize("model", ["llama3", "llama3.1"])  # the files with ignore_merges
def test_every_token_passes_the_token_filter(model: str, data_dir: Path) -> None:
    tok = Tokenizer.from_file(data_dir / "tokenizers" / model / "tokenizer.json")
    engine = tok._engine
    assert engine.ignore_merges
    words = vec[i64]([0] * merger.KEY_WORDS)
    token_filter = engine.token_filter
    missing = []
    for token, token_id in engine.whole_tokens.items():
        if 0 < len(token) <= merger.CACHE_MAX_CHARS:
            word, bits = merger._filter_word_bits(merger._fold(merger._piece_key(token, 0, len(token), words)), len(token_filter) - 1)
            if token_filter[word] & bits != bits:
                missing.append(token)
    assert not missing, f"{len(missing)} tokens refused by the filter, first {missing[:5]}"
    # And a piece that is a token comes out as that token.
    assert tok.encode(" Hello", add_special_tokens=False) == [engine.whole_tokens[" Hello"]]


def test_filter_bits_cover_all_64_positions() -> None:
    assert [merger._bit(k) for k in range(64)] == [1 << k for k in range(63)] + [-(1 << 63)]


def test_huge_pages_keep_the_ids(tok: Tokenizer) -> None:
    text = "Hello world, 漢字かなカナ 한국어 ไทย العربية हिन्दी 12345 " * 50
    before = tok.encode(text)
    advised = huge_pages.advise(tok._engine.tables())
    assert advised >= 0 and advised % huge_pages.HUGE_PAGE == 0
    setting = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if setting.exists() and "[never]" not in setting.read_text() and os.environ.get(huge_pages.ENV_SWITCH, "1") != "0":
        assert advised > 0  # the kernel has transparent huge pages and takes the advice
    assert tok.encode(text) == before


def test_huge_pages_can_be_turned_off(data_dir: Path) -> None:
    code = "from peek2.bpe import huge_pages; from librt.vecs import vec; from mypy_extensions import i64; print(huge_pages.advise([vec[i64]([0] * 1_000_000)]))"
    env = {**os.environ, huge_pages.ENV_SWITCH: "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "0"


def test_huge_pages_refuse_objects_without_a_buffer() -> None:
    with pytest.raises(TypeError, match="bytes-like|buffer"):
        huge_pages.advise([object()])
