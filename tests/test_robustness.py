"""Regression tests of issue 23 (robustness): each test names the item of the issue it proves.

Scaling checks compare the CPU time of one input at size n and 4n in the same run (best of a few
runs each), never a wall-clock limit: quadratic work shows as ~16x, linear as ~4x.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import pytest
import tokenizers

from peek2.tokenizer import Tokenizer


def cpu_seconds(call: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def growth(make: Callable[[int], str], encode: Callable[[str], object], n: int) -> float:
    """CPU time of ``encode(make(4 * n))`` over that of ``encode(make(n))``."""
    small, large = make(n), make(4 * n)
    encode(small)  # warm the piece cache and lazy tables alike for both sizes
    return cpu_seconds(lambda: encode(large)) / max(cpu_seconds(lambda: encode(small)), 1e-6)


def qwen3_chat(turns: int) -> str:
    return "".join(
        f"<|im_start|>user\nQuestion {i}: what is {i} + {i}?<|im_end|>\n"
        f"<|im_start|>assistant\n<think>\nAdding {i} to itself.\n</think>\n\n{2 * i}.<|im_end|>\n"
        for i in range(turns)
    )


def html_table(rows: int) -> str:
    return "<table>\n" + "".join(f"  <tr><td>{i}</td><td>row {i}</td></tr>\n" for i in range(rows)) + "</table>\n"


def cpp_templates(lines: int) -> str:
    return "".join(f"std::vector<std::pair<int,int>> v{i}; // </t> <t{i}>\n" for i in range(lines))


@pytest.fixture(scope="module")
def qwen3_files(data_dir: Path) -> tuple[Tokenizer, tokenizers.Tokenizer]:
    path = data_dir / "tokenizers" / "qwen3" / "tokenizer.json"
    return Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))


@pytest.mark.parametrize("make", [qwen3_chat, html_table, cpp_templates], ids=["chat", "html", "templates"])
def test_added_tokens_found_in_linear_time(qwen3_files: tuple[Tokenizer, tokenizers.Tokenizer], make: Callable[[int], str]) -> None:
    """Item 1: chat transcripts, HTML and C++ templates with a file whose added tokens start in
    several ways ("<|", "<t", "</") were quadratic (8,000 turns: 37.6 s against 0.53 s in tokenizers)."""
    tok, ref = qwen3_files
    text = make(8000)
    assert tok.encode(text) == ref.encode(text).ids
    assert tok.count(text) == len(ref.encode(text).ids)
    assert growth(make, tok.encode, 2000) < 6


def test_non_special_token_with_newline_linear(data_dir: Path) -> None:
    """Item 1: a non-special "\\nUser:" added token in a Llama-3 file made 4 MB take minutes."""
    spec = json.loads((data_dir / "tokenizers" / "llama3.1" / "tokenizer.json").read_text(encoding="utf-8"))
    spec["added_tokens"].append(
        {"id": 128256, "content": "\nUser:", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False}
    )
    text = json.dumps(spec)
    tok, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)

    def dialogue(turns: int) -> str:
        return "".join(f"\nUser: message {i}\nUnder review: {i}\nAssistant: reply {i}" for i in range(turns))

    sample = dialogue(3000)
    assert tok.encode(sample) == ref.encode(sample).ids
    assert growth(dialogue, tok.encode, 5000) < 6
