"""Serving benchmark: incremental prompts, streaming encode, event-loop stalls, streaming decode.

    python scripts/bench_serving.py [--model llama3.1] [--runs 5] [--async-mb 10]

(a) a ~100K-token prompt, then the same prompt plus a ~1K-token append: ``PromptCache.encode``
    of the longer prompt (the cache holding the shorter one) against a full ``encode`` of it
    (and, for scale, against tokenizers' full encode);
(b) ``stream_encoder`` fed 1 KB, 4 KB and 64 KB chunks (UTF-8 bytes, cut anywhere) against one
    ``encode`` of the whole text, on each corpus (piece cache emptied before every run);
(c) the longest event-loop stall while a 10 MB text is encoded: a heartbeat task records the
    largest gap between two of its turns, for peek2's ``async_encode`` (cooperative slices),
    peek2's ``encode`` in a worker thread (``run_in_executor``), peek2 in a process pool, and
    tokenizers' ``async_encode`` (a Rust thread pool);
(d) streaming decode, one id at a time: ``stream_decoder`` against ``tokenizers.decoders.DecodeStream``.

Every variant's ids or text are checked equal to the one-shot call before timing. Medians of
``--runs`` interleaved rounds (scripts/timing.py).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import DEFAULT_DATA, TEXT_CORPORA, text_corpus  # noqa: E402
from timing import interleaved  # noqa: E402

from peek2.tokenizer import Tokenizer  # noqa: E402

TOKENIZERS = DEFAULT_DATA.parent / "tokenizers"


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


# ==== (a) incremental prompt ====


def bench_incremental(tok: Tokenizer, path: Path, runs: int) -> None:
    english = text_corpus("english", size=2_000_000)
    # Cut at the character where the ids reach 100K and then 101K.
    prompt_chars = _chars_for_tokens(tok, english, 100_000)
    appended_chars = _chars_for_tokens(tok, english, 101_000)
    prompt, longer = english[:prompt_chars], english[:appended_chars]
    print(f"(a) prompt: {len(tok.encode(prompt)):,} tokens ({len(prompt):,} chars); "
          f"append: {len(tok.encode(longer)) - len(tok.encode(prompt)):,} tokens ({len(longer) - len(prompt):,} chars)")
    expected = tok.encode(longer)
    check = tok.prompt_cache()
    check.encode(prompt)
    assert check.encode(longer) == expected, "incremental ids differ from encode"
    # Wall-clock and CPU time (process_time leaves out the time other processes took the core).
    turn = longer[len(prompt) :]
    session = tok.prompt_session()
    session.append(prompt)
    keep, new = session.append(turn)
    assert tok.encode(prompt)[:keep] + new == expected, "session ids differ from encode"
    names = [name + kind for name in ("full", "incremental", "session") for kind in ("", " cpu")]
    timings: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(runs * 4):  # short calls: more rounds
        cache = tok.prompt_cache()
        cache.encode(prompt)
        session = tok.prompt_session()
        session.append(prompt)
        rounds = (
            ("incremental", lambda: cache.encode(longer)),
            ("session", lambda: session.append(turn)),
            ("full", lambda: tok.encode(longer)),
        )
        for name, run in rounds:
            # the piece cache is warm for the full encode too: the fairest full re-encode
            cpu, start = time.process_time(), time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - start)
            timings[name + " cpu"].append(time.process_time() - cpu)
    first = []
    for _ in range(runs):
        cache = tok.prompt_cache()
        start = time.perf_counter()
        cache.encode(prompt)
        first.append(time.perf_counter() - start)
    for kind in ("", " cpu"):
        full, incremental, appended = timings["full" + kind], timings["incremental" + kind], timings["session" + kind]
        print(f"    {'wall' if not kind else 'cpu ':4}  full re-encode {median_ms(full):8.2f} ms   "
              f"incremental (PromptCache.encode) {median_ms(incremental):6.3f} ms, "
              f"speed-up {statistics.median(full) / statistics.median(incremental):6.1f}x   "
              f"append (PromptSession.append) {median_ms(appended):6.3f} ms, "
              f"speed-up {statistics.median(full) / statistics.median(appended):6.1f}x")
    print(f"    first encode through the cache (no prior prompt): {median_ms(first):.2f} ms "
          f"({statistics.median(timings['full']) / statistics.median(first):.2f}x the speed of encode)")
    ids = tok.encode(longer)
    copies = []
    for _ in range(runs * 4):
        start = time.perf_counter()
        ids[:]  # noqa: B018
        copies.append(time.perf_counter() - start)
    print(f"    (the floor: one copy of the {len(ids):,} ids the call must return takes {median_ms(copies):.3f} ms)")
    from tokenizers import Tokenizer as Reference

    reference = Reference.from_file(str(path))
    assert reference.encode(longer).ids == expected, "tokenizers' ids differ"
    theirs = []
    for _ in range(runs):
        start = time.perf_counter()
        reference.encode(longer)
        theirs.append(time.perf_counter() - start)
    print(f"    tokenizers' full encode of the longer prompt: {median_ms(theirs):.1f} ms "
          f"({statistics.median(theirs) / statistics.median(timings['incremental']):.0f}x the incremental encode)")


def _chars_for_tokens(tok: Tokenizer, text: str, tokens: int) -> int:
    low, high = 0, len(text)
    while high - low > 1:
        middle = (low + high) // 2
        if len(tok.encode(text[:middle])) <= tokens:
            low = middle
        else:
            high = middle
    return low


# ==== (b) streaming encode ====


def bench_streaming(tok: Tokenizer, runs: int) -> None:
    print("(b) streaming encode vs one-shot encode, median MB/s of UTF-8 (ratio to the one-shot of the same input type);")
    print("    str chunks against encode(text), bytes chunks (cut anywhere) against encode(data.decode()); piece cache emptied per run;")
    print("    'ids +=' collects with ids += enc.feed(chunk) (a list per chunk), 'out' with enc.feed(chunk, ids) (appended in place)")
    sizes = (1024, 4096, 65536)
    forms = ("ids +=", "out")
    print(f"    {'corpus':8} {'input':5} {'form':6} {'one-shot':>9} " + " ".join(f"{f'{k // 1024} KB':>8} {'ratio':>6}" for k in sizes))
    for corpus in TEXT_CORPORA:
        text = text_corpus(corpus)
        data = text.encode("utf-8")
        expected = tok.encode(text)
        engines: dict[str, Callable[[], object]] = {
            "str one-shot": lambda: tok.encode(text),
            "bytes one-shot": lambda: tok.encode(data.decode("utf-8")),
        }
        for size in sizes:
            for kind, source in (("str", text), ("bytes", data)):
                chunks = [source[k : k + size] for k in range(0, len(source), size)]

                def collect(chunks: list = chunks) -> list[int]:  # type: ignore[type-arg]
                    encoder = tok.stream_encoder(add_special_tokens=True)
                    ids: list[int] = []
                    for chunk in chunks:
                        ids += encoder.feed(chunk)
                    return ids + encoder.finish()

                def append(chunks: list = chunks) -> list[int]:  # type: ignore[type-arg]
                    encoder = tok.stream_encoder(add_special_tokens=True)
                    ids: list[int] = []
                    for chunk in chunks:
                        encoder.feed(chunk, ids)
                    return encoder.finish(ids)

                for form, run in zip(forms, (collect, append)):
                    assert run() == expected, f"streaming ids differ at {size}-{kind} chunks ({form}) on {corpus}"
                    engines[f"{kind} {form} {size}"] = run
        seconds = interleaved(engines, runs, before=tok._engine.cache.clear)
        rates = {name: len(data) / statistics.median(times) / 1e6 for name, times in seconds.items()}
        for kind in ("str", "bytes"):
            base = rates[f"{kind} one-shot"]
            for form in forms:
                cells = " ".join(f"{rates[f'{kind} {form} {k}']:8.1f} {rates[f'{kind} {form} {k}'] / base:5.2f}x" for k in sizes)
                print(f"    {corpus:8} {kind:5} {form:6} {base:9.1f} {cells}")


# ==== (c) event-loop stalls ====


async def _stall(work: Callable[[], Any]) -> tuple[float, float, Any]:
    """The longest gap between two turns of a heartbeat task while ``work()`` is awaited, and the total time."""
    longest = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    start = time.perf_counter()
    result = await work()
    total = time.perf_counter() - start
    done = True
    await beat
    return longest, total, result


_WORKER_TOKENIZERS: dict[str, Tokenizer] = {}


def _encode_in_process(path: str, text: str) -> list[int]:
    """Runs in the pool's process: the tokenizer is loaded once per process, as a server would."""
    tok = _WORKER_TOKENIZERS.get(path)
    if tok is None:
        tok = _WORKER_TOKENIZERS[path] = Tokenizer.from_file(path)
    return tok.encode(text)


def bench_async(tok: Tokenizer, path: Path, megabytes: float, runs: int) -> None:
    from tokenizers import Tokenizer as Reference

    reference = Reference.from_file(str(path))
    base = text_corpus("xnli")
    text = (base * (int(megabytes * 1e6) // len(base.encode("utf-8")) + 1))
    text = text[: int(megabytes * 1e6 * len(text) / len(text.encode("utf-8")))]
    print(f"(c) longest event-loop stall while {len(text.encode('utf-8')) / 1e6:.1f} MB of XNLI text is encoded "
          f"(median of {runs}; heartbeat = asyncio.sleep(0) loop)")
    expected = tok.encode(text)
    loop_thread = concurrent.futures.ThreadPoolExecutor(1)
    processes = concurrent.futures.ProcessPoolExecutor(1)
    # Warm the worker process (load the tokenizer there once, as a server would at start-up).
    processes.submit(_encode_in_process, str(path), "warm").result()

    async def peek2_slices() -> list[int]:
        return await tok.async_encode(text)

    async def peek2_thread() -> list[int]:
        return await asyncio.get_running_loop().run_in_executor(loop_thread, tok.encode, text)

    async def peek2_process() -> list[int]:
        return await asyncio.get_running_loop().run_in_executor(processes, _encode_in_process, str(path), text)

    async def tokenizers_async() -> Any:
        return await reference.async_encode(text)  # an Encoding: reading .ids is timed apart below

    variants = {
        "peek2 async_encode (slices on the loop)": peek2_slices,
        "peek2 encode in a worker thread": peek2_thread,
        "peek2 encode in a process pool": peek2_process,
        "tokenizers async_encode": tokenizers_async,
    }
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in variants}
    for _ in range(runs):
        for name, work in variants.items():
            longest, total, result = asyncio.run(_stall(work))
            ids = result if isinstance(result, list) else result.ids
            assert ids == expected, f"{name}: ids differ"
            results[name][0].append(longest)
            results[name][1].append(total)
    print(f"    {'variant':42} {'longest stall':>14} {'total':>10}")
    for name, (stalls, totals) in results.items():
        print(f"    {name:42} {median_ms(stalls):11.2f} ms {median_ms(totals):7.0f} ms")
    encoding = reference.encode(text)
    start = time.perf_counter()
    encoding.ids  # noqa: B018  # what the loop pays after tokenizers' await, to get the list of ids
    print(f"    (tokenizers: reading Encoding.ids of {len(expected):,} tokens takes another "
          f"{(time.perf_counter() - start) * 1e3:.0f} ms on the loop)")
    processes.shutdown()
    loop_thread.shutdown()


# ==== (d) streaming decode ====


def bench_decode(tok: Tokenizer, path: Path, runs: int) -> None:
    from tokenizers import Tokenizer as Reference
    from tokenizers.decoders import DecodeStream

    reference = Reference.from_file(str(path))
    ids = tok.encode(text_corpus("xnli", size=200_000))
    expected = tok.decode(ids)

    def ours() -> str:
        decoder = tok.stream_decoder()
        feed = decoder.feed
        return "".join([feed(i) for i in ids]) + decoder.finish()

    def theirs() -> str:
        stream = DecodeStream(skip_special_tokens=False)
        return "".join(p for p in (stream.step(reference, i) for i in ids) if p is not None)

    assert ours() == expected and theirs() == expected
    seconds = interleaved({"peek2 stream_decoder": ours, "tokenizers DecodeStream": theirs}, runs)
    print(f"(d) streaming decode, one id per call ({len(ids):,} ids of XNLI):")
    for name, times in seconds.items():
        print(f"    {name:26} {statistics.median(times) / len(ids) * 1e9:7.0f} ns/id")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama3.1", help="folder under --tokenizers")
    parser.add_argument("--tokenizers", type=Path, default=TOKENIZERS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--async-mb", type=float, default=10.0, help="size of the text for (c)")
    parser.add_argument("--part", action="append", choices="abcd", help="run only these parts")
    args = parser.parse_args()
    path = args.tokenizers / args.model / "tokenizer.json"
    tok = Tokenizer.from_file(path)
    parts = args.part or list("abcd")
    print(f"model {args.model}, {args.runs} runs")
    if "a" in parts:
        bench_incremental(tok, path, args.runs)
    if "b" in parts:
        bench_streaming(tok, args.runs)
    if "c" in parts:
        bench_async(tok, path, args.async_mb, args.runs)
    if "d" in parts:
        bench_decode(tok, path, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
