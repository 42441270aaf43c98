"""Every path on every kind of input against the same call in tokenizers: is any one slower?

    python scripts/bench_every_path.py [--runs 5] [--below 1.5] [--model llama3.1 --model qwen3 ...]

For each model (default: llama3.1, qwen3, gpt4o, deepseek-v3) and each input (this project's README
and its tokenizer.py, an HTML table, rows of emoji, random CJK ideographs, XNLI sentences of all
15 languages joined, a chat transcript in the model's own format, and runs of 50,000 "=", spaces,
newlines, "a", digits and 20,000 "<|"), each call is timed beside tokenizers' same call, taking
turns: ``encode`` (with and without special tokens), ``encode_with_offsets`` and ``count``
against tokenizers' ``encode`` (which always makes offsets), ``decode`` (special tokens skipped
and kept), ``encode_batch`` and ``decode_batch`` of the input's lines, and a ``stream_encoder`` fed
64 characters at a time against one tokenizers ``encode`` of the whole. CPU time, medians of
``--runs``; peek2's piece cache is emptied before each of its runs (text it has not seen). The ids
of each input are checked against tokenizers first. Printed: each row whose ratio (tokenizers'
time over peek2's) is under ``--below``, then the smallest ratio of each model.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import DEFAULT_DATA, sentence_corpus  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def chat(model: str, sentences: list[str], turns: int) -> str:
    """A transcript of ``turns`` exchanges in the model's own chat format."""
    def said(k: int) -> str:
        return sentences[k % len(sentences)]

    if model.startswith("qwen"):
        return "".join(
            f"<|im_start|>user\n{said(k)}<|im_end|>\n<|im_start|>assistant\n<think>\nok</think>\n{said(k + 7)}<|im_end|>\n"
            for k in range(turns)
        )
    if model.startswith("llama"):
        return "<|begin_of_text|>" + "".join(
            f"<|start_header_id|>user<|end_header_id|>\n\n{said(k)}<|eot_id|>"
            f"<|start_header_id|>assistant<|end_header_id|>\n\n{said(k + 3)}<|eot_id|>"
            for k in range(turns)
        )
    return "".join(f"<|im_start|>user<|im_sep|>{said(k)}<|im_end|>" for k in range(turns))


def inputs(sentences: list[str]) -> dict[str, str]:
    rng = random.Random(5)
    return {
        "README": (ROOT / "README.md").read_text(encoding="utf-8"),
        "source code": (ROOT / "peek2" / "tokenizer.py").read_text(encoding="utf-8"),
        "HTML table": "".join(f'<tr><td class="c{k}">{sentences[k % len(sentences)][:30]}</td><td>{k}</td></tr>\n' for k in range(3000)),
        "emoji": "".join(rng.choice("😀🎉👍🏽👨‍👩‍👧🇫🇷❤️🔥") for _ in range(20_000)),
        "CJK": "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(30_000)),
        "XNLI joined": " ".join(rng.choice(sentences) for _ in range(500)),
        '"=" run': "=" * 50_000,
        "space run": " " * 50_000,
        "newline run": "\n" * 50_000,
        '"a" run': "a" * 50_000,
        "digits": "".join(rng.choice("0123456789") for _ in range(50_000)),
        '"<|" run': "<|" * 20_000,
    }


def ratio(ours: Callable[[], object], theirs: Callable[[], object], runs: int, before: Callable[[], None]) -> float:
    """tokenizers' median CPU time over peek2's, the two taking turns."""
    mine: list[float] = []
    other: list[float] = []
    for _ in range(runs):
        before()
        start = time.process_time()
        ours()
        mine.append(time.process_time() - start)
        start = time.process_time()
        theirs()
        other.append(time.process_time() - start)
    return statistics.median(other) / statistics.median(mine)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="folders under --tokenizers (default: llama3.1, qwen3, gpt4o, deepseek-v3)")
    parser.add_argument("--tokenizers", type=Path, default=DEFAULT_DATA.parent / "tokenizers")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="XNLI folder")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--below", type=float, default=1.5, help="print the rows under this ratio")
    args = parser.parse_args()
    import tokenizers

    from peek2 import Tokenizer

    sentences = sentence_corpus(args.data)[::10]
    for model in args.model or ["llama3.1", "qwen3", "gpt4o", "deepseek-v3"]:
        path = args.tokenizers / model / "tokenizer.json"
        tok, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
        clear = tok._engine.cache.clear
        texts = inputs(sentences)
        texts["chat transcript"] = chat(model, sentences, 400)
        rows: list[tuple[str, str, float]] = []
        for name, text in texts.items():
            ids = ref.encode(text).ids
            assert tok.encode(text) == ids, (model, name)
            lines = [line for line in text.split("\n") if line][:5000] or [text]
            lines_ids = [ref.encode(line).ids for line in lines]
            chunks = [text[k : k + 64] for k in range(0, len(text), 64)]

            def stream(chunks: list[str] = chunks) -> list[int]:
                encoder, out = tok.stream_encoder(), []
                for chunk in chunks:
                    encoder.feed(chunk, out)
                return encoder.finish(out)

            calls: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
                "encode": (lambda: tok.encode(text), lambda: ref.encode(text)),
                "encode, no special tokens": (lambda: tok.encode(text, add_special_tokens=False), lambda: ref.encode(text, add_special_tokens=False)),
                "encode_with_offsets": (lambda: tok.encode_with_offsets(text), lambda: ref.encode(text)),
                "count": (lambda: tok.count(text), lambda: ref.encode(text)),
                "decode": (lambda: tok.decode(ids), lambda: ref.decode(ids)),
                "decode, special tokens kept": (lambda: tok.decode(ids, skip_special_tokens=False), lambda: ref.decode(ids, skip_special_tokens=False)),
                "encode_batch of the lines": (lambda: tok.encode_batch(lines), lambda: ref.encode_batch(lines)),
                "decode_batch of the lines": (lambda: tok.decode_batch(lines_ids), lambda: ref.decode_batch(lines_ids)),
                "stream of 64 characters": (stream, lambda: ref.encode(text)),
            }
            for call, (ours, theirs) in calls.items():
                rows.append((name, call, ratio(ours, theirs, args.runs, clear)))
        for name, call, value in rows:
            if value < args.below:
                print(f"  {model:12} {name:16} {call:28} {value:6.2f}x")
        low = min(rows, key=lambda row: row[2])
        print(f"{model}: {len(rows)} calls, the smallest ratio {low[2]:.2f}x ({low[1]}, {low[0]})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
