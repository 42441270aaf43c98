"""The first call of each path in a new process, against tokenizers' first calls.

    python scripts/bench_first_calls.py [--runs 5] [--model llama3.2 --model qwen3 ...]

What a CLI call, a worker process of a corpus run or a new serverless replica pays once: each
figure is one call, timed in a process of its own that has just loaded the tokenizer (from
peek2's load cache, filled by a first load before the runs; the cache's collapse into huge pages
waited for), on the first 3,000 characters of this project's README; the median of ``--runs``
processes, in milliseconds, imports of the modules the call needs included. peek2's paths:
``encode``, ``encode_with_offsets``, ``count``, ``decode`` (500 ids, special tokens skipped, the
default), ``encode_batch`` (4 texts), a ``stream_encoder`` fed 100 characters at a time, a
``prompt_session`` appended 300 at a time, ``async_encode``; tokenizers': ``encode``, ``decode``,
``encode_batch`` of the same.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import START_UP_MODELS, start_up_arguments  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import asyncio, sys, time
path, engine, call = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(sys.argv[4], encoding="utf-8").read()[:3000]
ids = list(range(1000, 1500))
if engine == "tokenizers":
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(path)
    calls = {"encode": lambda: tok.encode(text), "decode": lambda: tok.decode(ids), "encode_batch": lambda: tok.encode_batch([text] * 4)}
else:
    from peek2 import Tokenizer
    from peek2.bpe import huge_pages
    tok = Tokenizer.from_file(path)
    huge_pages.wait()

    def stream():
        encoder, out = tok.stream_encoder(), []
        for k in range(0, len(text), 100):
            encoder.feed(text[k : k + 100], out)
        return encoder.finish(out)

    def session():
        prompt = tok.prompt_session()
        for k in range(0, len(text), 300):
            prompt.append(text[k : k + 300])

    calls = {
        "encode": lambda: tok.encode(text),
        "encode_with_offsets": lambda: tok.encode_with_offsets(text),
        "count": lambda: tok.count(text),
        "decode": lambda: tok.decode(ids),
        "encode_batch": lambda: tok.encode_batch([text] * 4),
        "stream_encoder": stream,
        "prompt_session": session,
        "async_encode": lambda: asyncio.run(tok.async_encode(text)),
    }
start = time.perf_counter()
calls[call]()
print((time.perf_counter() - start) * 1000)
"""

PEEK2_CALLS = ["encode", "encode_with_offsets", "count", "decode", "encode_batch", "stream_encoder", "prompt_session", "async_encode"]
TOKENIZERS_CALLS = ["encode", "decode", "encode_batch"]


def first_call(path: Path, engine: str, call: str, env: dict[str, str]) -> float:
    """Milliseconds of ``call`` in a new process that has just loaded ``path``."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), engine, call, str(ROOT / "README.md")],
        capture_output=True, text=True, env=env, check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    args = start_up_arguments(__doc__).parse_args()
    with tempfile.TemporaryDirectory(prefix="peek2-bench-first-") as directory:
        env = dict(os.environ, PEEK2_CACHE_DIR=directory)
        print(f"first call in a new process after the load, ms, median of {args.runs} processes")
        for model in args.model or START_UP_MODELS:
            path = args.tokenizers / model / "tokenizer.json"
            first_call(path, "peek2", "encode", env)  # (fills the load cache)
            theirs = {call: statistics.median(first_call(path, "tokenizers", call, env) for _ in range(args.runs)) for call in TOKENIZERS_CALLS}
            print(f"\n{model}: tokenizers " + ", ".join(f"{call} {ms:.2f}" for call, ms in theirs.items()))
            for call in PEEK2_CALLS:
                ms = statistics.median(first_call(path, "peek2", call, env) for _ in range(args.runs))
                peer = theirs.get(call, theirs["encode"])
                against = call if call in theirs else "encode"
                print(f"  peek2 {call:20} {ms:7.2f}   tokenizers' first {against} / this: {peer / ms:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
