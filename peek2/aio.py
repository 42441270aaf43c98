"""asyncio: encode and decode without holding the event loop, and stop when cancelled.

The work runs on the event loop itself, cut into slices: the text goes through a streaming
encoder (``peek2.streaming``) ``chunk_chars`` characters at a time, with an
``await asyncio.sleep(0)`` between slices. Other tasks run between slices, and a cancelled
task stops at the next one: no thread keeps encoding a text nobody waits for (HuggingFace
tokenizers' ``async_encode`` runs to completion on a worker thread even when cancelled).

Why not a worker thread (measured by ``scripts/bench_serving.py``, part c): the compiled
engine holds the GIL for a whole ``encode`` call, so a worker thread encoding 10 MB freezes the
loop for the whole call (the GIL is only handed over between Python bytecodes), and the
thread cannot be stopped. Slicing in the thread would fix the stalls but then adds GIL
hand-over latency (the loop waits up to ``sys.getswitchinterval()``, 5 ms, per switch) and
still needs a cancellation flag. A process pool gives parallelism but pickles the text and,
worse, unpickles the list of ids on the loop (a stall of its own for millions of ids) and
pays a process per worker. Cooperative slices cost about one ``sleep(0)`` per slice (a few
percent at 16K characters) and give the shortest stalls.

>>> ids = await tok.async_encode(text)                  # doctest: +SKIP
>>> text = await tok.async_decode(ids)                  # doctest: +SKIP

The bound on a stall is the time to encode one slice, plus the pending text the slice makes
final; one enormous piece (megabytes without a piece boundary) is encoded in one go, since
its ids depend on all of it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Iterable, Sequence

from peek2._scan import surrogate_error
from peek2.streaming import StreamDecoder, StreamEncoder

if TYPE_CHECKING:
    from peek2.tokenizer import Tokenizer

CHUNK_CHARS = 16_384
"""Characters encoded between two yields to the event loop (about 0.5-2 ms of work)."""

CHUNK_IDS = 65_536
"""Ids decoded between two yields to the event loop."""


async def async_encode(
    tok: Tokenizer,
    text: str,
    add_special_tokens: bool = True,
    *,
    split_special_tokens: bool = False,
    chunk_chars: int = CHUNK_CHARS,
) -> list[int]:
    """``tok.encode(text, ...)``, yielding to the event loop every ``chunk_chars`` characters.

    Raises:
        TypeError: ``text`` is not a str.
        ValueError: ``chunk_chars`` below 1; a lone surrogate in ``text``.
        asyncio.CancelledError: the task was cancelled (the work stops at the next slice).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    _check_chunk(chunk_chars, "chunk_chars")
    if len(text) <= chunk_chars:
        return tok.encode(text, add_special_tokens, split_special_tokens=split_special_tokens)
    encoder = StreamEncoder(tok, add_special_tokens, split_special_tokens=split_special_tokens)
    ids: list[int] = []
    try:
        for start in range(0, len(text), chunk_chars):
            encoder.feed(text[start : start + chunk_chars], ids)
            await asyncio.sleep(0)
        return encoder.finish(ids)
    except ValueError as error:  # a lone surrogate, at its index in a slice: give it in text
        raise surrogate_error(text, error) from None


async def async_encode_batch(
    tok: Tokenizer,
    texts: Iterable[str],
    add_special_tokens: bool = True,
    *,
    split_special_tokens: bool = False,
    chunk_chars: int = CHUNK_CHARS,
) -> list[list[int]]:
    """``tok.encode_batch(texts, ...)``, yielding to the loop every ``chunk_chars`` characters in all."""
    if isinstance(texts, str):
        raise TypeError("async_encode_batch expects a sequence of str, not a single str")
    _check_chunk(chunk_chars, "chunk_chars")
    out: list[list[int]] = []
    since_yield = 0
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"texts must be str, not {type(text).__name__}")
        if len(text) > chunk_chars:
            out.append(await async_encode(tok, text, add_special_tokens, split_special_tokens=split_special_tokens, chunk_chars=chunk_chars))
            continue
        out.append(tok.encode(text, add_special_tokens, split_special_tokens=split_special_tokens))
        since_yield += len(text) + 16  # many short texts cost their calls too
        if since_yield >= chunk_chars:
            since_yield = 0
            await asyncio.sleep(0)
    return out


async def async_decode(
    tok: Tokenizer, ids: Sequence[int], skip_special_tokens: bool = False, *, chunk_ids: int = CHUNK_IDS
) -> str:
    """``tok.decode(ids, ...)``, yielding to the event loop every ``chunk_ids`` ids."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise TypeError(f"ids must be a sequence of int, not {type(ids).__name__}")
    _check_chunk(chunk_ids, "chunk_ids")
    if len(ids) <= chunk_ids:
        return tok.decode(ids, skip_special_tokens)
    decoder = StreamDecoder(tok, skip_special_tokens)
    parts: list[str] = []
    for start in range(0, len(ids), chunk_ids):
        parts.append(decoder.feed(ids[start : start + chunk_ids]))
        await asyncio.sleep(0)
    parts.append(decoder.finish())
    return "".join(parts)


def _check_chunk(value: int, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, not {value!r}")
