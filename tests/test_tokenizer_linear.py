"""Linear time and bounded memory of the tokenizer on adversarial 1 MB texts.

The cost per UTF-8 byte of 1M characters of each kind is compared with 100K of the same kind
(a quadratic merger shows ~10x), and with ordinary English at 1M (a small factor), in one run;
no wall-clock limit. Ordinary English is XNLI's English text, every run starting with an empty
piece cache, as a new document would (one sentence repeated is not ordinary: after its first
copy every piece is a cache hit, several times faster than real text). Costs are CPU time of
this process, so another process on the machine does not count. The piece cache must stay
within its documented bound.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from compliance.xnli import iter_xnli_tsv
from peek2.tokenizer import Tokenizer

SMALL, LARGE = 100_000, 1_000_000


def kinds() -> dict[str, str]:
    rng = random.Random(7)
    scalars = [cp for cp in range(0x20, 0x30000) if not 0xD800 <= cp <= 0xDFFF]
    random_text = "".join(chr(rng.choice(scalars)) for _ in range(LARGE))
    return {
        "english": "The quick brown fox's 12 jumps, over the lazy dog.\n",
        "one letter": "a",
        "one CJK": "漢",
        "spaces": " ",
        "digits": "7",
        "punctuation": "!?",
        "random scalars": random_text,
    }


KINDS = kinds()


def per_byte(tok: Tokenizer, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        tok._engine.cache.clear()  # every run starts cold, as a new document would
        start = time.process_time()
        tok.encode(text, add_special_tokens=False)
        best = min(best, time.process_time() - start)
    return best / len(text.encode("utf-8"))


def sized(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


@pytest.fixture(scope="module")
def llama(data_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(data_dir / "tokenizers" / "llama3.1" / "tokenizer.json")


@pytest.mark.parametrize("kind", list(KINDS))
def test_cost_per_char_does_not_grow(llama: Tokenizer, kind: str) -> None:
    small, large = per_byte(llama, sized(KINDS[kind], SMALL), 5), per_byte(llama, sized(KINDS[kind], LARGE), 2)
    assert large / small < 3.0, f"{kind}: {large / small:.1f}x the cost per byte at 1M than at 100K"


@pytest.fixture(scope="module")
def ordinary_english(data_dir: Path) -> str:
    rows = iter_xnli_tsv(data_dir / "xnli", ("test", "dev"))
    text = " ".join(row.premise + " " + row.hypothesis for row in rows if row.language == "en")
    assert len(text) >= LARGE
    return text[:LARGE]


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "english"])
def test_adversarial_within_small_factor_of_english(llama: Tokenizer, ordinary_english: str, kind: str) -> None:
    english = per_byte(llama, ordinary_english, 2)
    other = per_byte(llama, sized(KINDS[kind], LARGE), 2)
    assert other / english < 25.0, f"{kind}: {other / english:.1f}x the cost per byte of English"


def test_cache_is_bounded(data_dir: Path) -> None:
    tok = Tokenizer.from_file(data_dir / "tokenizers" / "qwen2" / "tokenizer.json", cache_size=100)
    tok.encode(KINDS["random scalars"][:200_000])
    assert tok._engine.cache.count <= 100
    # Ids and packed characters: at most 64 words a piece on average, plus the last piece's
    # (127 rare characters: 4 ids and 3 characters a word each, 550 words).
    rng = random.Random(5)
    rare = " ".join("".join(chr(rng.randint(0xF0000, 0xFFFFD)) for _ in range(127)) for _ in range(300))
    tok.encode(rare)
    assert 0 < len(tok._engine.cache.multi) <= 64 * 100 + 600
    with pytest.raises(ValueError, match="cache_size"):
        Tokenizer.from_file(data_dir / "tokenizers" / "qwen2" / "tokenizer.json", cache_size=-1)
