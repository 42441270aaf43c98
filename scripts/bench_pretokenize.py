"""Pre-tokenization throughput: peek2 against regex.findall and tokenizers' Split, in one run.

    python scripts/bench_pretokenize.py [--family llama3] [--runs 5] [--corpus xnli ...]

For deepseek-v3 the regex engines apply its three patterns in turn, each on the pieces of the
one before (Isolated: matches and the text between them are pieces), as its file does.

For each corpus: MB/s (UTF-8 bytes of input per second), median of --runs interleaved
rounds, with min-max, and the ratios of every engine to regex.findall and to tokenizers.
Pieces are checked equal across engines before timing. Each timed run starts from a collected
heap (``timing.interleaved``).

The row "cut at known ends" is a floor for any splitter that returns the same ``list[str]``: the
same pieces cut out of each text at boundaries found before the clock starts, with C calls
(``operator.itemgetter`` of the pieces' slices, then ``list``), no scanning at all. Where a text
holds few pieces (the sentences one by one), making the strs and lists, keeping and freeing them,
is most of what any engine costs: peek2.split runs at about that floor there.
"""

from __future__ import annotations

import argparse
import operator
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import regex  # noqa: E402
from corpora import ALL_CORPORA, DEFAULT_DATA, sentence_corpus, text_corpus  # noqa: E402
from timing import interleaved, reference_versions, table  # noqa: E402
from tokenizers import Regex, pre_tokenizers  # noqa: E402

import peek2  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="llama3", choices=[f for f in peek2.FAMILIES if f not in peek2.TIKTOKEN_PATTERNS])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--corpus", action="append", choices=ALL_CORPORA)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="XNLI folder")
    args = parser.parse_args()
    pattern = peek2.Peek2Pattern(args.family)
    patterns = peek2.FAMILIES[args.family].patterns
    compiled = [regex.compile(p) for p in patterns]
    splits = [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in patterns]
    split = splits[0] if len(splits) == 1 else pre_tokenizers.Sequence(splits)

    def findall(text: str) -> list[str]:
        if len(compiled) == 1:
            return compiled[0].findall(text)  # one pattern that matches every character
        pieces = [text]
        for one in compiled:
            cut: list[str] = []
            for piece in pieces:
                at = 0
                for match in one.finditer(piece):
                    if match.start() > at:
                        cut.append(piece[at : match.start()])
                    cut.append(match.group())
                    at = match.end()
                if at < len(piece):
                    cut.append(piece[at:])
            pieces = cut
        return pieces

    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, peek2 compiled: {peek2.COMPILED}, "
        f"family {args.family}, median of {args.runs} interleaved runs"
    )
    print(reference_versions())
    for name in args.corpus or ALL_CORPORA:
        if name == "sentences":
            texts = sentence_corpus(args.data)
        else:
            texts = [text_corpus(name, args.data)]
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        for text in texts[:2000]:
            pieces = pattern.split(text)
            assert pieces == findall(text) == [p for p, _ in split.pre_tokenize_str(text)], text[:80]
        cutters = [_cutter(pattern.split_offsets(text)) for text in texts]
        engines = {
            "cut at known ends": lambda: [cut(t) for cut, t in zip(cutters, texts)],
            "peek2.split": lambda: [pattern.split(t) for t in texts],
            "peek2.split_offsets": lambda: [pattern.split_offsets(t) for t in texts],
            "regex.findall": lambda: [findall(t) for t in texts],
            "tokenizers Split": lambda: [split.pre_tokenize_str(t) for t in texts],
        }
        seconds = interleaved(engines, args.runs)
        print(f"\n{name}: {nbytes / 1e6:.2f} MB in {len(texts)} text(s); pieces identical in all engines")
        print(table(nbytes, seconds, ["regex.findall", "tokenizers Split"]))
    return 0


def _cutter(offsets: list[tuple[int, int]]) -> Callable[[str], list[str]]:
    """The pieces of a text at ``offsets`` (found beforehand), cut by one C call."""
    if not offsets:
        return lambda text: []
    if len(offsets) == 1:
        (start, end), = offsets
        return lambda text: [text[start:end]]
    getter = operator.itemgetter(*[slice(start, end) for start, end in offsets])
    return lambda text: list(getter(text))


if __name__ == "__main__":
    sys.exit(main())
