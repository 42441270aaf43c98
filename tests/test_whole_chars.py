"""Characters entering the merge as their own token (peek2.bpe.whole_chars): the ids of byte-level BPE.

Two checks. On the real vocabularies, every whole character is merged in the contexts where a
merged token could join part of its bytes with a neighbour (built here from the merges, not
from whole_chars' own tables), and compared with the byte path. On random small vocabularies
whose merges join characters' bytes across character boundaries and break the rank order on
purpose, the ids are compared with tokenizers.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer as Reference
from peek2.bpe import merger
from peek2.tokenizer import Tokenizer
from tests.vocabularies import byte_level_file

MODELS = ["llama3.1", "qwen2", "deepseek-v3", "gpt4o"]


def whole_ids(tok: Tokenizer, piece: str) -> list[int]:
    """The ids of ``piece`` from ``_merge_text`` (whole characters where they fit), uncached."""
    size = merger._merge_text(tok._engine, piece, 0, len(piece))
    return [tok._engine.scratch_ids[k] for k in range(size)]


def straddling_tokens(tok: Tokenizer) -> list[tuple[bytes, int]]:
    """Merged tokens holding part of a character at one end and more bytes, with where the part ends
    (negative: the token ends with the first bytes of a character; positive: it starts with the
    last bytes of one)."""
    found = []
    for left, right in tok.spec.merges:
        token = left + right
        if token.isascii():
            continue
        head = 0
        while head < len(token) and 0x80 <= token[head] < 0xC0:
            head += 1
        if 0 < head < len(token):
            found.append((token, head))
        last = len(token) - 1
        while last > 0 and 0x80 <= token[last] < 0xC0:
            last -= 1
        lead = token[last]
        width = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if last > 0 and lead >= 0xC0 and len(token) - last < width:
            found.append((token, last - len(token)))
    return found


def starting_with(data: bytes) -> list[str]:
    """The characters whose UTF-8 starts with ``data`` and is one byte longer."""
    found = []
    for last in range(0x80, 0xC0):
        try:
            text = (data + bytes([last])).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(text) == 1:
            found.append(text)
    return found


def ending_with(data: bytes) -> list[str]:
    """Characters of two, three and four bytes whose UTF-8 ends with the one byte ``data``."""
    if len(data) != 1 or not 0x80 <= data[0] < 0xC0:
        return []
    return [chr(base | (data[0] & 63)) for base in (0xC0, 0x3C0, 0x4E00, 0xE00, 0x1F600)]


@pytest.fixture(scope="module", params=MODELS)
def tok(request: pytest.FixtureRequest, data_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(data_dir / "tokenizers" / request.param / "tokenizer.json")


def test_whole_characters_next_to_straddling_tokens(tok: Tokenizer) -> None:
    whole = [chr(c) for c in range(merger.WHOLE_CHARS) if tok._engine.whole.entries[c] >= 0]
    assert len(whole) > 3000  # Llama-3: 3,425 two- and three-byte characters; Qwen2: 14,763
    by_start: dict[bytes, list[str]] = {}
    by_end: dict[bytes, list[str]] = {}
    for char in whole:
        data = char.encode("utf-8")
        for k in range(1, len(data)):
            by_start.setdefault(data[:k], []).append(char)
            by_end.setdefault(data[k:], []).append(char)
    rng = random.Random(7)
    pieces = set()
    for char in whole:
        pieces.update((char, char * 2, "a" + char, char + "a", " " + char, char + rng.choice(whole) + rng.choice(whole)))
    for token, cut in straddling_tokens(tok):
        if cut < 0:  # token = rest + first bytes of a character: put such characters after rest
            rest = token[:cut].decode("utf-8", errors="ignore")
            for char in by_start.get(token[cut:], [])[:400]:
                pieces.update((rest + char, rest[-1:] + char + rng.choice(whole)))
                # rest may be the end of a character only (o200k's "\x80\xe0\xb8"): then after
                # characters that end with it
                pieces.update(preceding + char for preceding in ending_with(token[:cut]))
        else:  # token = last bytes of a character + rest
            rest = token[cut:].decode("utf-8", errors="ignore")
            for char in by_end.get(token[:cut], [])[:400]:
                pieces.update((char + rest, rng.choice(whole) + char + rest[:1]))
                # rest may be the start of a character only (DeepSeek-V3's "\x82\xe0\xb0"):
                # then before the characters it starts
                pieces.update(char + following for following in starting_with(token[cut:])[:8])
    assert len(pieces) > 20_000
    for piece in sorted(pieces):
        if piece:
            assert whole_ids(tok, piece) == tok._engine.merge(piece.encode("utf-8")), ascii(piece)


def test_routing_through_encode_matches_tokenizers(tok: Tokenizer) -> None:
    reference = Reference.from_file(tok.spec.source)
    whole = [chr(c) for c in range(0x4E00, 0xA000) if tok._engine.whole.entries[c] >= 0]
    others = ["a", " ", "é", "п", "е", "о", "ा", "्", "。", "，", "\u0e32", "\u0e40", "1"]
    rng = random.Random(11)
    for _ in range(3000):
        text = "".join(rng.choice(whole) if rng.random() < 0.7 else rng.choice(others) for _ in range(rng.randint(1, 30)))
        assert tok.encode(text, False) == reference.encode(text, add_special_tokens=False).ids, ascii(text)


# ==== Random vocabularies ====

ALPHABET = "中丸乐国圆é\u00e8пра\u0905\u093e ab"  # shared lead and last bytes across characters


def random_vocabulary(rng: random.Random) -> str:
    """A byte-level BPE tokenizer.json whose merges are picked at random from adjacent symbols of a
    random text (so some join parts of two characters), with some ranks moved out of order."""
    text = "".join(rng.choice(ALPHABET) for _ in range(400)).encode("utf-8")
    symbols = [bytes([b]) for b in text]
    merges: list[tuple[bytes, bytes]] = []
    for _ in range(rng.randint(20, 120)):
        if len(symbols) < 2:
            break
        k = rng.randrange(len(symbols) - 1)
        pair = (symbols[k], symbols[k + 1])
        if pair in merges:
            continue
        merges.append(pair)
        joined, at = [], 0
        while at < len(symbols):  # apply it everywhere, leftmost first
            if at + 1 < len(symbols) and (symbols[at], symbols[at + 1]) == pair:
                joined.append(symbols[at] + symbols[at + 1])
                at += 2
            else:
                joined.append(symbols[at])
                at += 1
        symbols = joined
    for _ in range(rng.randint(0, 6)):  # out of order: a later merge moved earlier
        merges.insert(rng.randrange(len(merges) + 1), merges.pop(rng.randrange(len(merges))))
    return byte_level_file([], merges)


def test_random_vocabularies_match_tokenizers() -> None:
    rng = random.Random(3)
    used = 0
    for _ in range(150):
        json_text = random_vocabulary(rng)
        tok, reference = Tokenizer.from_str(json_text), Reference.from_str(json_text)
        used += tok._engine.whole.count > 0
        for _ in range(60):
            text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 24)))
            assert tok.encode(text, False) == reference.encode(text, add_special_tokens=False).ids, ascii(text)
    assert used > 50  # most vocabularies have whole characters to test


def test_pure_path_gives_the_same_ids() -> None:
    # PEEK2_PURE=1 runs merger.py as plain Python: same ids on small random vocabularies (the real
    # ones take minutes to load uncompiled).
    rng = random.Random(5)
    cases = []
    for _ in range(6):
        json_text = random_vocabulary(rng)
        texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))) for _ in range(40)]
        cases.append([json_text, texts + ["中" * 300]])  # and the heap path of long pieces
    script = (
        "import json, sys\n"
        "from peek2 import COMPILED, Tokenizer\n"
        "cases = json.loads(sys.stdin.read())\n"
        "print(json.dumps([COMPILED, [[Tokenizer.from_str(j).encode(t, False) for t in ts] for j, ts in cases]]))\n"
    )
    runs = {}
    for pure in ("1", "0"):
        result = subprocess.run(
            [sys.executable, "-c", script], input=json.dumps(cases), capture_output=True, text=True,
            env={**os.environ, "PEEK2_PURE": pure}, check=True,
        )
        runs[pure] = json.loads(result.stdout)
    assert runs["1"][0] is False
    assert runs["1"][1] == runs["0"][1]
