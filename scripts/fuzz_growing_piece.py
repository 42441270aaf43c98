"""Fuzz rule 3 of the streaming encoder (ids of a growing piece sent before it ends) against encode.

Long runs over small random alphabets (drawn from scalars of every category: ASCII and Latin
letters of both cases, CJK, kana, Cyrillic, marks, spaces, newlines, punctuation, digits,
emoji), periodic or random, after and before random text, streamed in random chunks and
compared with ``Tokenizer.encode`` of the whole text (which tests/test_xnli.py and the fuzz
tests tie to ``tokenizers``). tests/test_growing_piece.py runs a sample of this in CI.

    python scripts/fuzz_growing_piece.py --model llama3.1 --model gpt4o --cases 2000

``--long``: runs of more than ``LONG_PIECE_BYTES`` fed in chunks of up to a megabyte (rule 3 then
searches the growing piece block by block, ``GrowingPiece.final_prefix``), to a stream and to a
prompt session in one append, and ``encode`` checked against one heap a piece (``long_pieces`` off).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from peek2.bpe.merger import LONG_PIECE_BYTES
from peek2.tokenizer import Tokenizer

POOL = (
    list("aAbBzZsStT'=-_*#.,!?/\\<>()[]{}|~^`\"") + [" ", "\n", "\r", "\t", "\xa0", "\u3000"]
    + list("0123456789") + list("éÉßœŒǅ") + list("你好世界的一是") + list("ひらがなカタカナー")
    + list("приветМИР") + ["\u0301", "\u0323", "\u0308"] + list("，。！？「」") + ["😀", "🎉"] + list("สวัสดี")
)
HEADS = ["", "x", "Hi ", "\n", "1", "!", " ", "'", "A"]
TAILS = ["", " x", "x", "\n", "!", "7", " \n", "'s", "'S", "A", "a", "é", "\u0301", "你", "  y", "\r\n"]


def load(data: Path, name: str, scratch: Path) -> Tokenizer:
    path = data / "tokenizers" / name / "tokenizer.json"
    if name == "deepseek-v3":  # the stream refuses its normalized added tokens: match them raw
        spec = json.loads(path.read_text(encoding="utf-8"))
        for token in spec["added_tokens"]:
            token["normalized"] = False
        path = scratch / "deepseek-v3.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
    return Tokenizer.from_file(path)


def case(rng: random.Random, limit: int) -> str:
    alphabet = rng.sample(POOL, rng.randint(1, 3))
    if rng.random() < 0.5:
        run = "".join(rng.choice(alphabet) for _ in range(rng.randint(limit, 4 * limit)))
    else:
        period = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))
        run = (period * (4 * limit // len(period) + 1))[: rng.randint(limit, 4 * limit)]
    return rng.choice(HEADS) + run + rng.choice(TAILS)


def stream(tok: Tokenizer, rng: random.Random, text: str, sizes: list[int]) -> list[int]:
    encoder = tok.stream_encoder()
    ids: list[int] = []
    at = 0
    while at < len(text):
        size = rng.choice(sizes)
        encoder.feed(text[at : at + size], ids)
        at += size
    return encoder.finish(ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--model", action="append", help="default: llama3.1, qwen3, gpt4o, deepseek-v3")
    parser.add_argument("--cases", type=int, default=500, help="per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--long", action="store_true", help="runs of more than LONG_PIECE_BYTES, in chunks of up to 1 MB")
    args = parser.parse_args()
    sizes = [1, 7, 3000, 100_000, 400_000, 1_000_000] if args.long else [1, 2, 3, 7, 64, 500, 3000]
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.model or ["llama3.1", "qwen3", "gpt4o", "deepseek-v3"]:
            tok = load(args.data, name, Path(scratch))
            limit = LONG_PIECE_BYTES if args.long else tok.stream_encoder()._stream.plan.interior_min
            rng = random.Random(f"{args.seed}-{name}")
            cut = 0
            for k in range(args.cases):
                text = case(rng, limit)
                expected = tok.encode(text, False)
                got = stream(tok, rng, text, sizes)
                if args.long:
                    engine = tok._engine
                    blocks = engine.long_pieces
                    engine.long_pieces = None
                    try:
                        engine.cache.clear()
                        one_heap = tok.encode(text, False)
                    finally:
                        engine.long_pieces = blocks
                    session = tok.prompt_session(add_special_tokens=False)
                    session.append(text[: len(text) // 3])
                    session.append(text[len(text) // 3 :])
                    if one_heap != expected or session.ids != expected or tok.count(text, False) != len(expected):
                        got = []  # (reported below)
                if got != expected:
                    failures += 1
                    print(f"{name} case {k}: MISMATCH {ascii(text[:40])} ... {ascii(text[-20:])}", flush=True)
                probe = tok.stream_encoder()
                probe.feed(text[: len(text) // 2])
                cut += probe.pending_chars < len(text) // 2 - 64
            print(f"{name}: {args.cases} cases, {failures} mismatches so far; rule 3 cut {cut} of the halves", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
