"""Calls that bug hunts found slower than the reference, each timed beside that reference in one run.

    python scripts/bench_hunt_cases.py [--runs 5] [--data ../shared/data] [--only decode]

Each case is one call on one input, in peek2 and in the reference engine (tokenizers, or tiktoken
for a rank file), interleaved; the figures are CPU seconds (``time.process_time``), medians of
``--runs``, and the ratio is the reference's time over peek2's (above 1: peek2 is faster). peek2's
piece cache (and for offsets, the memo of NFC clusters) is emptied before each of its runs (text it has not seen). Every case checks first that
both engines give the same ids (or text). The cases, and the stop of the project that measured
them before and after its change, are in each case's label:

- ``rank file specials``: a tiktoken rank file (Llama-3.2's ``tokenizer.model``) on text dense
  with special tokens, against ``tiktoken.Encoding.encode(allowed_special="all")``;
- ``decode one id``: a generation loop's ``decode([id])``, and the same with a tuple, a NumPy
  integer and a one-id array, against tokenizers' ``decode``;
- ``rank file r50k random CJK words``: GPT-2's ranks (built from its files as tiktoken's gpt2
  reads them) on 400K characters of words of random CJK ideographs, every piece new;
- ``rank file one piece``: the same rank file on one long piece (a run of one character);
- ``offsets NFC``: Qwen3's ``encode_with_offsets`` of runs of marks that decompose, and of 40,000
  random CJK ideographs after one U+212B (which NFC changes), against tokenizers' ``encode`` (which
  always computes offsets); and a GPT-2 file whose ``ByteLevel`` post-processor trims offsets, on
  whitespace (every token trimmed) and on English;
- ``long words``: words of 256 to 2,000 random letters (one piece each), Llama-3.2's file against
  tiktoken with its ``tokenizer.model``;
- ``async held run``: ``async_encode`` of a run the stream holds whole or cuts by rule 3 (spaces
  and tabs in turn), against tokenizers' ``async_encode``;
- ``stream a character at a time``: a ``stream_encoder`` fed one character per ``feed`` (runs with
  no piece boundary, and English), against tokenizers' one ``encode`` of the whole (it has no
  stream; Qwen's NFC and a text of added tokens too);
- ``session appends``: a ``prompt_session`` appended 1, 4 or 16 characters at a time (a server
  adding each generated token's text), its ids after every append, on English, Chinese and one long
  piece, against tokenizers' one ``encode`` of the whole;
- ``token_to_id`` of 10,000 random vocabulary tokens and added tokens (DeepSeek-V3 has 818), asked
  again (answers remembered) and for the first time, and ``id_to_bytes`` against tokenizers'
  ``id_to_token``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Iterable
from functools import partial
from typing import Any
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from peek2 import PATTERNS, Tokenizer  # noqa: E402
from peek2.serving.aio import async_encode  # noqa: E402
from timing import reference_versions  # noqa: E402  (scripts/, this file's folder)

DATA = ROOT.parent / "shared" / "data"
Case = tuple[str, Callable[[], object], Callable[[], object], Callable[[], None] | None]


def cpu_medians(ours: Callable[[], object], reference: Callable[[], object], runs: int, before: Callable[[], None] | None) -> tuple[float, float]:
    """Medians of CPU seconds of each, the two taking turns (drift hits both alike)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        if before is not None:
            before()
        for run, kept in ((ours, times[0]), (reference, times[1])):
            start = time.process_time()
            run()
            kept.append(time.process_time() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def each(call: Callable[[Any], object], items: Iterable[Any]) -> list[object]:
    return [call(item) for item in items]


def run_coroutine(make: Callable[[], Coroutine[Any, Any, object]]) -> object:
    return asyncio.run(make())


def cases(data: Path, only: str) -> list[Case]:
    import unicodedata

    import numpy as np
    import tiktoken
    import tokenizers

    from peek2.normalize import aligned
    from tiktoken.load import load_tiktoken_bpe

    files = data / "tokenizers"
    out: list[Case] = []
    rng = random.Random(7)
    if only in ("", "rank"):
        specials = {"<|begin_of_text|>": 128000, "<|eot_id|>": 128009}
        model = str(files / "llama3.2" / "tokenizer.model")
        ours = Tokenizer.from_tiktoken(model, pattern="llama3", special_tokens=specials)
        theirs = tiktoken.Encoding("llama3.2", pat_str=PATTERNS["llama3"], mergeable_ranks=load_tiktoken_bpe(model), special_tokens=specials)
        for text in ("<|eot_id|>x" * 50_000, "<|begin_of_text|> hello world, how are you today?" * 20_000):
            assert ours.encode(text) == theirs.encode(text, allowed_special="all")
            out.append((f"rank file specials {text[:14]!r}", partial(ours.encode, text), partial(theirs.encode, text, allowed_special="all"), ours._engine.cache.clear))
        # Words of 1-40 random CJK ideographs, every piece new: GPT-2's ranks (r50k_base, from its
        # files, as tiktoken's gpt2 reads them) give each many ids (the piece cache's admission).
        import base64
        import tempfile

        from tiktoken.load import data_gym_to_mergeable_bpe_ranks

        ranks = data_gym_to_mergeable_bpe_ranks(str(files / "gpt2" / "vocab.bpe"), str(files / "gpt2" / "encoder.json"))
        with tempfile.TemporaryDirectory() as folder:
            rank_file = Path(folder) / "r50k_base.tiktoken"
            rank_file.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
            r50k = Tokenizer.from_tiktoken(rank_file, pattern="r50k_base")
        gpt2 = tiktoken.Encoding("r50k_base", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks, special_tokens={})
        words = []
        while sum(map(len, words)) < 400_000:
            words.append("".join(chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(rng.randrange(1, 40))) + rng.choice(["\uff0c", "\u3002", " ", ""]))
        text = "".join(words)
        assert r50k.encode(text) == gpt2.encode(text)
        out.append(("rank file r50k random CJK words", partial(r50k.encode, text), partial(gpt2.encode, text), r50k._engine.cache.clear))
        for unit, length in ((" ", 4000), ("a", 4000), (" ", 40_000), ("\u0436", 40_000)):
            text = unit * length  # (one piece: the merger's heap)
            assert ours.encode(text) == theirs.encode(text)
            out.append((f"rank file one piece {ascii(unit)} x {length:,}", partial(ours.encode, text), partial(theirs.encode, text), ours._engine.cache.clear))
    if only in ("", "decode"):
        path = str(files / "llama3.1" / "tokenizer.json")
        ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
        ids = [rng.randrange(1000, 100_000) for _ in range(50_000)]
        forms: dict[str, list[object]] = {
            "list": [[i] for i in ids],
            "tuple": [(i,) for i in ids],
            "NumPy int in a list": [[np.int64(i)] for i in ids],
            "one-id array": [np.array([i]) for i in ids],
        }
        for name, batch in forms.items():
            assert [ours.decode(b) for b in batch[:100]] == [ref.decode(b) for b in batch[:100]]  # type: ignore[arg-type]
            out.append((f"decode one id ({name}) x 50,000", partial(each, ours.decode, batch), partial(each, ref.decode, batch), None))
    if only in ("", "offsets"):
        path = str(files / "qwen3" / "tokenizer.json")
        ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
        many = "\u212b" + "".join(chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(40_000))  # (one change, 20K distinct)
        # NFD Korean (random syllables as jamo, more than the clusters' memo holds), and short
        # clusters of marks out of order
        jamo = "".join(
            chr(0x1100 + rng.randrange(19)) + chr(0x1161 + rng.randrange(21)) + (chr(0x11A8 + rng.randrange(27)) if rng.random() < 0.5 else "")
            + (" " if rng.random() < 0.3 else "")
            for _ in range(30_000)
        )
        short = "".join(rng.choice("aeo") + "".join(rng.choice("\u0301\u0323\u0302\u0327\u0344\u0f73") for _ in range(rng.randint(2, 6))) + " " for _ in range(15_000))
        # zalgo: letters and 0-6 marks drawn from U+0300-U+036F and Hebrew points
        marks = [chr(c) for c in range(0x300, 0x370)] + [chr(c) for c in range(0x591, 0x5C8) if unicodedata.combining(chr(c))]
        zalgo = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") + "".join(rng.choice(marks) for _ in range(rng.randint(0, 6))) for _ in range(20_000))

        def unseen(o: Tokenizer = ours) -> None:  # (the pieces and the NFC clusters: text not seen)
            o._engine.cache.clear()
            aligned._clusters.clear()

        lv_t = "".join(chr(0xAC00 + 28 * rng.randrange(399)) + chr(0x11A8 + rng.randrange(27)) for _ in range(10_000))  # (LV syllables, a trailing jamo after each)
        # clusters longer than the memo's 32 characters: "e" and 33 marks of up to 16 classes
        by_class: dict[int, list[str]] = {}
        for char in marks + [chr(c) for c in range(0x64B, 0x660)]:
            if unicodedata.combining(char):
                by_class.setdefault(unicodedata.combining(char), []).append(char)
        classes = sorted(by_class)[:16]
        long_clusters = "".join("e" + "".join(rng.choice(by_class[rng.choice(classes)]) for _ in range(33)) + " " for _ in range(1_200))
        for text in ("\u0344" * 100_000, "a" + "\u0341" * 100_000, "\u0f73" * 100_000, "a" + "\u0323\u0340" * 50_000, many, jamo, short, zalgo, lv_t, long_clusters):
            got, expected = ours.encode_with_offsets(text, add_special_tokens=False), ref.encode(text, add_special_tokens=False)
            assert (got.ids, got.offsets) == (expected.ids, expected.offsets)
            out.append((
                f"offsets NFC {ascii(text[:3])}",
                partial(ours.encode_with_offsets, text, add_special_tokens=False),
                partial(ref.encode, text, add_special_tokens=False),
                unseen,
            ))
        # GPT-2's ranks with a ByteLevel post-processor that trims offsets (RoBERTa's files do too)
        gpt2 = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(files / "gpt2" / "encoder.json"), str(files / "gpt2" / "vocab.bpe")))
        gpt2.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        gpt2.decoder = tokenizers.decoders.ByteLevel()
        gpt2.post_processor = tokenizers.processors.ByteLevel(trim_offsets=True)
        trimming = Tokenizer.from_str(gpt2.to_str())
        for text in (" " * 80_000, "\t " * 40_000, "the cat sat on a mat. " * 4_000):
            got, expected = trimming.encode_with_offsets(text), gpt2.encode(text)
            assert (got.ids, got.offsets) == (expected.ids, expected.offsets)
            out.append((f"offsets trimmed gpt2 {ascii(text[:3])}", partial(trimming.encode_with_offsets, text), partial(gpt2.encode, text), partial(trimming._engine.cache.clear)))
    if only in ("", "long"):
        ours = Tokenizer.from_file(files / "llama3.2" / "tokenizer.json")
        model = str(files / "llama3.2" / "tokenizer.model")
        theirs = tiktoken.Encoding("llama3.2", pat_str=PATTERNS["llama3"], mergeable_ranks=load_tiktoken_bpe(model), special_tokens={})
        for length in (256, 1000, 2000):
            words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(length)) for _ in range(300_000 // length)]
            assert [ours.encode(w, add_special_tokens=False) for w in words[:10]] == [theirs.encode(w) for w in words[:10]]
            out.append((
                f"long words of {length} letters",
                partial(each, partial(ours.encode, add_special_tokens=False), words),
                partial(each, theirs.encode, words),
                ours._engine.cache.clear,
            ))
    if only in ("", "async"):
        for name, text in (
            ("llama3.1", "\n" + " " * 200_000), ("qwen3", "e" + "\u0301\u0323" * 100_000), ("llama3.1", " \t" * 80_000), ("deepseek-v3", " \t" * 80_000)
        ):
            path = str(files / name / "tokenizer.json")
            ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)

            async def reference(t: str = text, r: tokenizers.Tokenizer = ref) -> list[int]:
                return (await r.async_encode(t, add_special_tokens=False)).ids  # type: ignore[no-any-return]

            def peek2_async(t: str = text, o: Tokenizer = ours) -> list[int]:
                return asyncio.run(async_encode(o, t, add_special_tokens=False))

            assert peek2_async() == asyncio.run(reference())
            out.append((f"async held run {name} {ascii(text[:3])}", peek2_async, partial(run_coroutine, reference), ours._engine.cache.clear))
    if only in ("", "stream"):
        for name, text in (("gpt4o", " " * 100_000), ("gpt4o", "a" * 100_000), ("deepseek-v3", " " * 100_000), ("llama3.1", "The quick brown fox jumps over the lazy dog. " * 2_000),
            ("qwen3", "The quick brown fox jumps over the lazy dog. " * 2_000), ("qwen2", "The quick brown fox jumps over the lazy dog. " * 2_000),
            ("llama3.1", "<|eot_id|>" * 10_000), ("qwen3", "\u6211\u4eec\u4eca\u5929\u53bb\u516c\u56ed\u6563\u6b65\uff0c\u5929\u6c14\u5f88\u597d\u3002" * 3_000),
        ):
            path = str(files / name / "tokenizer.json")
            ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)

            def streamed(t: str = text, o: Tokenizer = ours) -> list[int]:
                encoder, ids = o.stream_encoder(), []
                for char in t:
                    encoder.feed(char, ids)
                return encoder.finish(ids)

            assert streamed() == ref.encode(text, add_special_tokens=False).ids
            label = f"stream a character at a time {name} {ascii(text[:3])}"
            out.append((label, streamed, partial(ref.encode, text, add_special_tokens=False), ours._engine.cache.clear))
    if only in ("", "vocab"):
        for name in ("llama3.2", "deepseek-v3"):
            path = str(files / name / "tokenizer.json")
            ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
            vocabulary = list(ref.get_vocab(with_added_tokens=False).items())
            tokens = [token for token, _ in rng.sample(vocabulary, 10_000)]
            added = list(ref.get_added_tokens_decoder().values())
            contents = [rng.choice(added).content for _ in range(10_000)]
            ids = [token_id for _, token_id in rng.sample(vocabulary, 10_000)]
            assert each(ours.token_to_id, tokens + contents) == each(ref.token_to_id, tokens + contents)
            out.append((f"token_to_id of vocabulary tokens {name}", partial(each, ours.token_to_id, tokens), partial(each, ref.token_to_id, tokens), None))

            def forget(lookup: Any = ours.token_to_id) -> None:  # (the remembered answers: tokens never asked before)
                lookup.memo, lookup.added = {}, None

            out.append((f"token_to_id of vocabulary tokens, first time {name}", partial(each, ours.token_to_id, tokens), partial(each, ref.token_to_id, tokens), forget))
            out.append((f"token_to_id of added tokens {name}", partial(each, ours.token_to_id, contents), partial(each, ref.token_to_id, contents), None))
            out.append((f"id_to_bytes / id_to_token {name}", partial(each, ours.id_to_bytes, ids), partial(each, ref.id_to_token, ids), None))
    if only in ("", "session"):
        english = "The quick brown fox jumps over the lazy dog, and then it sleeps. " * 500
        chinese = "\u6211\u4eec\u4eca\u5929\u53bb\u516c\u56ed\u6563\u6b65\uff0c\u5929\u6c14\u5f88\u597d\u3002" * 2_000
        run = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(30_000))  # (one piece: CJK letters without punctuation)
        spaces = " " * 15_000 + "x" + " " * 15_000
        for name, text, step in (
            ("llama3.2", english, 1), ("llama3.2", english, 4), ("qwen3", english, 1), ("qwen3", english, 4), ("qwen3", chinese, 1),
            ("llama3.2", run, 4), ("llama3.2", run, 16), ("deepseek-v3", spaces, 4),
        ):
            path = str(files / name / "tokenizer.json")
            ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)

            def appended(t: str = text, o: Tokenizer = ours, s: int = step) -> list[int]:
                session, ids = o.prompt_session(add_special_tokens=False), []
                for k in range(0, len(t), s):
                    keep, new = session.append(t[k : k + s])
                    del ids[keep:]
                    ids += new
                return ids

            assert appended() == ref.encode(text, add_special_tokens=False).ids
            label = f"session appends of {step} {name} {ascii(text[:3])}"
            out.append((label, appended, partial(ref.encode, text, add_special_tokens=False), ours._engine.cache.clear))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--only", choices=["", "rank", "decode", "offsets", "long", "async", "stream", "session", "vocab"], default="")
    args = parser.parse_args()
    print(f"CPU seconds, medians of {args.runs} interleaved runs; ratio = reference / peek2")
    print(reference_versions())
    print(f"  {'case':44} {'peek2':>8} {'reference':>10} {'ratio':>7}")
    for label, ours, reference, before in cases(args.data, args.only):
        mine, theirs = cpu_medians(ours, reference, args.runs, before)
        print(f"  {label:44} {mine:8.4f} {theirs:10.4f} {theirs / mine:6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
