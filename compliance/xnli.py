"""XNLI compliance: peek2 against the reference on every sentence of XNLI 1.0.

    python -m compliance.xnli --data ../shared/data/xnli --family llama3 --family qwen2
    python -m compliance.xnli --data ../shared/data/xnli --tokenizer ../shared/data/tokenizers/llama3.1/tokenizer.json
    python -m compliance.xnli --hf --family llama3      # facebook/xnli through `datasets` (network)

``--family`` compares pre-tokenizer pieces and offsets with ``Split(Regex)``; ``--tokenizer``
compares ids (both ``add_special_tokens`` settings) and ``decode`` with ``tokenizers.Tokenizer``.
Prints per-language counts and the first mismatches; exits 1 on any mismatch, 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
SPLITS = ("test", "dev")
HEADER = ["language", "gold_label", "sentence1", "sentence2"]


@dataclass(frozen=True)
class XnliRow:
    language: str
    split: str
    premise: str
    hypothesis: str


def iter_xnli_tsv(folder: str | Path, splits: Iterable[str] = SPLITS) -> Iterator[XnliRow]:
    """Rows of ``xnli.<split>.tsv`` files (4 columns, header ``language gold_label sentence1 sentence2``).

    Raises:
        FileNotFoundError: a split's file is missing.
        ValueError: a file has another header or a row another number of columns.
    """
    for split in splits:
        path = Path(folder) / f"xnli.{split}.tsv"
        if not path.is_file():
            raise FileNotFoundError(f"XNLI {split} split not found: {path}")
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, None)
            if header != HEADER:
                raise ValueError(f"{path}: header {header!r}, expected {HEADER!r}")
            for number, row in enumerate(reader, start=2):
                if len(row) != 4:
                    raise ValueError(f"{path}:{number}: {len(row)} columns, expected 4")
                yield XnliRow(row[0], split, row[2], row[3])


def every_nth(rows: Iterable[XnliRow], every: int) -> Iterator[XnliRow]:
    """The first row of every ``every`` of each language and split (``every`` 1: all of them).

    The test suite's sample (CI's time is bounded); the full run is this module's command.
    """
    if every < 1:
        raise ValueError(f"every must be at least 1, not {every}")
    seen: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (row.language, row.split)
        index = seen.get(key, 0)
        seen[key] = index + 1
        if index % every == 0:
            yield row


def sampled_count(rows: int, every: int) -> int:
    """How many of ``rows`` rows :func:`every_nth` keeps."""
    return -(-rows // every)


def iter_xnli_hf(splits: Iterable[str] = SPLITS, languages: Iterable[str] = LANGUAGES) -> Iterator[XnliRow]:
    """Rows of ``facebook/xnli`` (per-language configurations) through the ``datasets`` library."""
    try:
        import datasets
    except ImportError:
        raise ImportError('loading XNLI from the hub needs `datasets`: pip install "peek2[datasets]"') from None
    for split in splits:
        hf_split = "validation" if split == "dev" else split
        for language in languages:
            for item in datasets.load_dataset("facebook/xnli", language, split=hf_split):
                yield XnliRow(language, split, item["premise"], item["hypothesis"])


@dataclass
class LanguageCount:
    sentences: int = 0
    items: int = 0
    mismatches: int = 0


@dataclass
class Report:
    """Per (check, language) counts and the first mismatches in detail."""

    counts: dict[tuple[str, str], LanguageCount] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    max_details: int = 10

    @property
    def mismatches(self) -> int:
        return sum(count.mismatches for count in self.counts.values())

    def add(self, check: str, language: str, items: int, problem: str | None) -> None:
        count = self.counts.setdefault((check, language), LanguageCount())
        count.sentences += 1
        count.items += items
        if problem is not None:
            count.mismatches += 1
            if len(self.details) < self.max_details:
                self.details.append(f"[{check} {language}] {problem}")

    def render(self) -> str:
        lines = [f"{'check':28} {'lang':5} {'sentences':>10} {'items':>11} {'mismatches':>11}"]
        for (check, language), count in sorted(self.counts.items()):
            lines.append(f"{check:28} {language:5} {count.sentences:10} {count.items:11} {count.mismatches:11}")
        lines.extend(self.details)
        lines.append(f"total mismatches: {self.mismatches}")
        return "\n".join(lines)


Check = Callable[[str], "tuple[int, str | None]"]


def family_check(family: str) -> Check:
    """Pieces and offsets of one text against the reference Split."""
    from compliance.reference import first_mismatch, peek2_split, reference_split

    reference, ours = reference_split(family), peek2_split(family)

    def check(text: str) -> tuple[int, str | None]:
        expected, got = reference(text), ours(text)
        return len(expected), None if expected == got else f"{text!r}\n{first_mismatch(expected, got)}"

    return check


def tokenizer_check(path: str, offsets: bool = False) -> Check:
    """Ids (with and without special tokens), decode, and with ``offsets`` the character offsets
    of one text against tokenizers.Tokenizer (``path``: a tokenizer.json, or GPT-2's encoder.json
    with its vocab.bpe beside it)."""
    from compliance.reference import first_mismatch, reference_and_peek2

    reference, ours = reference_and_peek2(path)

    def check(text: str) -> tuple[int, str | None]:
        ids = []
        # tokenizers' encode with special tokens is its encode without them, then post_process:
        # calling the two steps ourselves gives the same encodings (the same code) for one encode.
        plain = reference.encode(text, add_special_tokens=False)
        for add in (True, False):
            encoding = reference.post_process(plain, None, True) if add else plain
            expected, got = encoding.ids, ours.encode(text, add)
            if expected != got:
                return len(expected), f"add_special_tokens={add} {text!r}\n{first_mismatch(expected, got)}"
            ids = expected
            if offsets and add:  # (the text's own offsets, and the (0, 0) of the tokens the post-processor adds)
                got_offsets = ours.encode_with_offsets(text, add_special_tokens=add).offsets
                if encoding.offsets != got_offsets:
                    return len(ids), f"offsets, add_special_tokens={add} {text!r}\n{first_mismatch(encoding.offsets, got_offsets)}"
        decoded, expected_text = ours.decode(ids, skip_special_tokens=False), reference.decode(ids, skip_special_tokens=False)
        if decoded != expected_text or decoded != ours.normalize(text):
            return len(ids), f"decode {text!r}: reference {expected_text!r}, peek2 {decoded!r}"
        return len(ids), None

    return check


def run(rows: Iterable[XnliRow], checks: dict[str, Check], max_details: int = 10) -> Report:
    """Run every check on the premise and the hypothesis of every row."""
    report = Report(max_details=max_details)
    for row in rows:
        for name, check in checks.items():
            for text in (row.premise, row.hypothesis):
                items, problem = check(text)
                report.add(name, row.language, items, problem)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compliance.xnli", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="folder with xnli.test.tsv and xnli.dev.tsv")
    source.add_argument("--hf", action="store_true", help="load facebook/xnli through `datasets`")
    parser.add_argument("--family", action="append", default=[], help="pre-tokenizer family (repeatable)")
    parser.add_argument("--tokenizer", action="append", default=[], help="tokenizer.json to compare ids (repeatable)")
    parser.add_argument("--offsets", action="store_true", help="with --tokenizer, compare offsets too")
    parser.add_argument("--split", action="append", choices=SPLITS, help="split (repeatable; default both)")
    parser.add_argument("--language", action="append", choices=LANGUAGES, help="language (default all)")
    parser.add_argument("--every", type=int, default=1, help="only the first row of every N per language and split (default 1: all)")
    args = parser.parse_args(argv)
    if not args.family and not args.tokenizer:
        parser.error("give at least one --family or --tokenizer")
    splits = args.split or list(SPLITS)
    languages = set(args.language or LANGUAGES)
    try:
        checks = {f"split:{family}": family_check(family) for family in args.family}
        checks.update({f"ids:{Path(path).parent.name}": tokenizer_check(path, args.offsets) for path in args.tokenizer})
        rows = iter_xnli_hf(splits, sorted(languages)) if args.hf else iter_xnli_tsv(args.data, splits)
        report = run(every_nth((row for row in rows if row.language in languages), args.every), checks)
    except (OSError, ValueError, ImportError) as error:
        print(f"compliance.xnli: {error}", file=sys.stderr)
        return 2
    print(report.render())
    return 1 if report.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
