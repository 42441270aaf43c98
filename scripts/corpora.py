"""Benchmark corpora, built deterministically from XNLI and the Python standard library.

xnli       dev premises and hypotheses of the 15 languages in turn (a sentence of each), one per line
english    English XNLI sentences (test + dev) as paragraphs of 8 sentences
european   German, French and Spanish XNLI sentences (test + dev) as paragraphs of 8, a third each
code       the standard library's .py files, sorted by path
cjk        Chinese XNLI sentences (test + dev), one per line
sentences  XNLI dev sentences of all languages, as a list encoded one by one

Each text corpus is cut to ``size`` characters (default about 1 MB).
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compliance.xnli import iter_xnli_tsv  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "xnli"
TEXT_CORPORA = ("xnli", "english", "european", "code", "cjk")
ALL_CORPORA = (*TEXT_CORPORA, "sentences")


def _sentences(folder: Path, splits: tuple[str, ...], language: str | None = None) -> list[str]:
    return [
        text
        for row in iter_xnli_tsv(folder, splits)
        if language is None or row.language == language
        for text in (row.premise, row.hypothesis)
    ]


def _interleaved(folder: Path) -> list[str]:
    """Dev sentences, a sentence of each language in turn: a cut keeps every language (the file
    is sorted by language: its first million characters were Arabic, Bulgarian and German)."""
    by_language: dict[str, list[str]] = {}
    for row in iter_xnli_tsv(folder, ("dev",)):
        by_language.setdefault(row.language, []).extend((row.premise, row.hypothesis))
    return [sentence for turn in zip(*by_language.values()) for sentence in turn]


def _stdlib_code(size: int) -> str:
    parts: list[str] = []
    total = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        total += len(text)
        if total >= size:
            break
    return "".join(parts)


def text_corpus(name: str, folder: Path = DEFAULT_DATA, size: int = 1_000_000) -> str:
    """One of TEXT_CORPORA, cut to ``size`` characters."""
    if name == "xnli":
        text = "\n".join(_interleaved(folder))
    elif name == "english":
        english = _sentences(folder, ("test", "dev"), "en")
        text = "\n\n".join(" ".join(english[k : k + 8]) for k in range(0, len(english), 8))
    elif name == "european":  # Latin-1 but for some quotes and dashes, one language after another
        thirds = []
        for language in ("de", "fr", "es"):
            sentences = _sentences(folder, ("test", "dev"), language)
            paragraphs = "\n\n".join(" ".join(sentences[k : k + 8]) for k in range(0, len(sentences), 8))
            thirds.append(paragraphs[: size // 3])
        text = "\n\n".join(thirds)
    elif name == "code":
        text = _stdlib_code(size)
    elif name == "cjk":
        text = "\n".join(_sentences(folder, ("test", "dev"), "zh"))
    else:
        raise ValueError(f"unknown corpus {name!r}; choose from {', '.join(TEXT_CORPORA)}")
    return text[:size]


def sentence_corpus(folder: Path = DEFAULT_DATA, count: int = 20_000) -> list[str]:
    """The first ``count`` XNLI dev sentences, a sentence of each language in turn."""
    return _interleaved(folder)[:count]
