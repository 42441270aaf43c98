"""How much of a corpus the piece cache could serve if a piece were cut where no token spans.

    python scripts/subpiece_potential.py [--model deepseek-v3 ...] [--corpus cjk ...]

A measurement for a design, not a benchmark of the engine. Byte-pair merging never joins two
symbols into a token that the vocabulary lacks, so where no token of the vocabulary spans the
boundary between two characters of a piece (its bytes holding the end of the text before the
boundary and the start of the text after it, the boundary falling between two of its bytes that
start characters), no merge crosses it: the piece's ids are those of its two sides merged alone,
in the same order (the argument of ``peek2.bpe.growing_piece``). A long Chinese piece, a whole
clause that rarely comes again, is then a row of short sub-pieces that do. This script cuts every
piece of the corpus so, with the exact rule (tokens that start or end inside a character
included), and prints, for the pieces and for the sub-pieces, how many there are, how many are
distinct, and the share of the corpus's bytes in first occurrences: what a cache of any size
still has to merge.

On 2026-11-26 (``--corpus cjk``, 1.1 MB of Chinese XNLI sentences): first occurrences 48.5% ->
23.1% of the bytes with DeepSeek-V3, 50.9% -> 3.2% with Llama-3.1, 50.8% -> 14.6% with Qwen3,
50.8% -> 3.8% with GPT-4o's file; on the XNLI corpus of 15 languages (``--corpus xnli``) 25.6% ->
19.3% (DeepSeek-V3), 22.1% -> 18.5% (Llama-3.1), 22.1% -> 17.1% (Qwen3), 25.8% -> 21.5% (GPT-4o).

Tried in the engine the same day, not kept: a piece of 8 characters or more that missed the piece
cache was cut at those boundaries (the rule compiled as a hash set of (left, right) codes of every
token's inner boundaries, with filters of which parts of characters occur) and each part looked up
in a cache of parts. Bit-exact (XNLI, Chinese, English and code against tokenizers, five files),
but more work, not less: callgrind, 300K characters of Chinese, instructions in the encode,
Llama-3.1 130.8M -> 162.2M, DeepSeek-V3 135.4M -> 166.0M. Merging fell by 15M (whole characters
already make those merges cheap), and cutting (12.8M) and keying and storing the parts (about 20M)
cost more than that. Only long pieces, whose merge costs more per character, might repay it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import DEFAULT_DATA, TEXT_CORPORA, text_corpus  # noqa: E402

import peek2  # noqa: E402
from peek2 import Tokenizer  # noqa: E402

TOKENIZERS = DEFAULT_DATA.parent / "tokenizers"


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte < 0xC0


def _width(lead: int) -> int:
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def spans(vocab: dict[bytes, int]) -> set[tuple[bytes, bytes]]:
    """(left, right) for every token and every character boundary inside it: ``left`` the whole
    character before the boundary, or the bytes of it the token holds when it starts inside that
    character; ``right`` the character after it, or the bytes of it the token holds."""
    found: set[tuple[bytes, bytes]] = set()
    for token in vocab:
        for i in range(1, len(token)):
            if _is_continuation(token[i]):
                continue  # (not a character boundary)
            j = i - 1
            while j > 0 and _is_continuation(token[j]):
                j -= 1
            left = token[j:i]
            if not _is_continuation(token[j]) and len(left) != _width(token[j]):
                continue  # an incomplete character before a lead byte: never a boundary of UTF-8 text
            if _is_continuation(token[j]):
                left = token[:i]  # the token starts inside a character
            found.add((left, token[i : i + _width(token[i])]))
    return found


def spanned(keys: set[tuple[bytes, bytes]], before: str, after: str) -> bool:
    left, right = before.encode("utf-8"), after.encode("utf-8")
    return any((left[-k:], right[:m]) in keys for k in range(1, len(left) + 1) for m in range(1, len(right) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="folders under --tokenizers (default: deepseek-v3, llama3.1, qwen3, gpt4o)")
    parser.add_argument("--corpus", action="append", choices=TEXT_CORPORA, help="default: cjk")
    parser.add_argument("--tokenizers", type=Path, default=TOKENIZERS)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="XNLI folder")
    args = parser.parse_args()
    for corpus in args.corpus or ["cjk"]:
        text = text_corpus(corpus, args.data)
        total = len(text.encode("utf-8"))
        for model in args.model or ["deepseek-v3", "llama3.1", "qwen3", "gpt4o"]:
            tok = Tokenizer.from_file(args.tokenizers / model / "tokenizer.json")
            keys = spans(tok.spec.vocab)
            cut: dict[tuple[str, str], bool] = {}
            pieces = peek2.split(text, pattern=tok.family)
            seen_pieces: set[str] = set()
            seen_parts: set[str] = set()
            new_pieces = new_parts = parts = 0
            for piece in pieces:
                if piece not in seen_pieces:
                    seen_pieces.add(piece)
                    new_pieces += len(piece.encode("utf-8"))
                start = 0
                for i in range(1, len(piece) + 1):
                    if i < len(piece):
                        pair = (piece[i - 1], piece[i])
                        if pair not in cut:
                            cut[pair] = not spanned(keys, *pair)
                        if not cut[pair]:
                            continue
                    part = piece[start:i]
                    start = i
                    parts += 1
                    if part not in seen_parts:
                        seen_parts.add(part)
                        new_parts += len(part.encode("utf-8"))
            print(
                f"{corpus:6} {model:12} pieces {len(pieces):>7,} ({len(seen_pieces):>6,} distinct, first occurrences "
                f"{new_pieces / total:5.1%} of the bytes)   sub-pieces {parts:>7,} ({len(seen_parts):>6,} distinct, "
                f"first occurrences {new_parts / total:5.1%})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
