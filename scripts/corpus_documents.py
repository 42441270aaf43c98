"""Mixed documents for corpus runs, generated reproducibly from XNLI and the standard library.

A document is one of: a paragraph of XNLI sentences of one language (15 languages), a
multi-script paragraph, a Python source file of the standard library, a chat transcript in
Llama-3's or Qwen's own format, an HTML table, a long run of one character, or an empty text.
``documents(seed)`` yields them without end; ``write_jsonl`` writes a given number of bytes.

    python scripts/corpus_documents.py OUT.jsonl --mb 1000      # the benchmark's 1 GB corpus
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import sysconfig
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compliance.xnli import iter_xnli_tsv  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "xnli"


def _sources(folder: Path) -> tuple[dict[str, list[str]], list[str]]:
    by_language: dict[str, list[str]] = {}
    for row in iter_xnli_tsv(folder, ("test", "dev")):
        by_language.setdefault(row.language, []).extend((row.premise, row.hypothesis))
    code = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))[:400]:
        if "site-packages" in path.parts:
            continue
        try:
            code.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return by_language, code


def documents(seed: int = 0, folder: Path = DEFAULT_DATA) -> Iterator[str]:
    """Mixed documents, the same for the same seed."""
    by_language, code = _sources(folder)
    languages = sorted(by_language)
    rng = random.Random(seed)
    while True:
        kind = rng.random()
        if kind < 0.45:
            sentences = by_language[rng.choice(languages)]
            start = rng.randrange(len(sentences))
            yield " ".join(sentences[start : start + rng.randint(1, 30)])
        elif kind < 0.60:
            yield "\n".join(rng.choice(by_language[rng.choice(languages)]) for _ in range(rng.randint(2, 12)))
        elif kind < 0.72:
            text = rng.choice(code)
            start = rng.randrange(max(len(text) - 4000, 1))
            yield text[start : start + rng.randint(200, 8000)]
        elif kind < 0.80:
            turns = []
            english = by_language["en"]
            for _ in range(rng.randint(1, 8)):
                role = rng.choice(("user", "assistant"))
                body = " ".join(rng.choice(english) for _ in range(rng.randint(1, 4)))
                if rng.random() < 0.5:
                    turns.append(f"<|start_header_id|>{role}<|end_header_id|>\n\n{body}<|eot_id|>")
                else:
                    turns.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
            yield "".join(turns)
        elif kind < 0.88:
            rows = "".join(
                f"<tr><td>{k}</td><td>{rng.choice(by_language['fr'])}</td></tr>\n" for k in range(rng.randint(1, 30))
            )
            yield f"<html><body><table>\n{rows}</table></body></html>"
        elif kind < 0.93:
            yield rng.choice(("=", " ", "\n", "ab", "😀", "0", "\u0301")) * rng.randint(1, 3000)
        elif kind < 0.97:
            yield " ".join(rng.choice(by_language["zh"]) + rng.choice(by_language["ja" if "ja" in by_language else "th"]) for _ in range(3))
        else:
            yield ""


def write_jsonl(path: str | Path, size: int, seed: int = 0, folder: Path = DEFAULT_DATA) -> int:
    """Write documents as JSONL ({"id", "text"}) until ``size`` bytes; returns the documents written."""
    written = 0
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for text in documents(seed, folder):
            line = json.dumps({"id": count, "text": text}, ensure_ascii=False) + "\n"
            out.write(line)
            written += len(line.encode("utf-8"))
            count += 1
            if written >= size:
                return count
    return count


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output")
    parser.add_argument("--mb", type=float, default=1000.0, help="size in MB (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the xnli folder")
    args = parser.parse_args()
    count = write_jsonl(args.output, int(args.mb * 1e6), args.seed, args.data)
    print(f"{args.output}: {count:,} documents", file=sys.stderr)
