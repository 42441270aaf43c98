"""asyncio: encode and decode without holding the event loop, and stop when cancelled.

The work runs on the event loop itself, cut into slices: the text goes through a streaming
encoder (``peek2.serving.streaming``) ``chunk_chars`` characters at a time, with an
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
final. One enormous piece (a run of one character, megabytes without a piece boundary) has ids
that depend on all of it, so it cannot be sliced: ``await tok.async_encode("=" * 5_000_000)``
held the loop 1.8-3.0 s in one slice. When a text's pending piece passes ``OFFLOAD_CHARS``, the
whole encode moves to a new process (``peek2.serving.encode_worker``, isolated: it loads the tokenizer
from its pickle, about a second, and imports nothing of the caller's program, unlike
multiprocessing's spawn): the loop only moves the text and the ids through pipes, the ids as an
array of 32-bit integers made into the list in slices of ``CHUNK_IDS`` (a run of marks that NFC
may reorder has millions of ids: unpickled as a list, 3 million held the loop 60 ms). Cancelling the task kills that process. A tokenizer
that cannot be pickled (built from a spec in memory, or its file changed or removed since it was
loaded) encodes such a text on the loop, as before. A tokenizer that no stream can encode (added
tokens with ``normalized: true`` in a file with a normalizer) encodes a text in one call: on the
loop up to ``OFFLOAD_CHARS`` characters, beyond that in the worker process when it can be pickled.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
from itertools import islice
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence, SupportsIndex

from peek2.bpe.merger import as_flag
from peek2.argument_checks import check_count, check_ids, check_texts, is_array, text_error
from peek2.pretokenize.scanner import surrogate_error
from peek2.serving.encode_worker import IDS_TYPECODE
from peek2.serving.streaming import StreamDecoder, StreamEncoder, plan_of

if TYPE_CHECKING:
    from peek2.tokenizer import Tokenizer

CHUNK_CHARS = 16_384
"""Characters encoded between two yields to the event loop (about 0.5-2 ms of work)."""

CHUNK_IDS = 65_536
"""Ids decoded between two yields to the event loop."""

OFFLOAD_CHARS = 1 << 18
"""Pending characters of one unfinished piece past which ``async_encode`` moves to a worker process."""


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
        TypeError: ``text`` is not a str; ``chunk_chars`` is not an int.
        ValueError: ``chunk_chars`` below 1; a lone surrogate in ``text``.
        asyncio.CancelledError: the task was cancelled (the work stops at the next slice).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    _check_chunk(chunk_chars, "chunk_chars")
    if len(text) <= chunk_chars:
        return tok.encode(text, add_special_tokens, split_special_tokens=split_special_tokens)
    try:
        encoder = StreamEncoder(tok, add_special_tokens, split_special_tokens=split_special_tokens)
    except NotImplementedError:
        # A tokenizer no stream can encode (added tokens matched after a normalizer): one call,
        # in a worker process when the text is long enough to stall the loop (it raised here; a
        # bug hunt).
        request = _worker_request(tok, text, add_special_tokens, split_special_tokens) if len(text) > OFFLOAD_CHARS else None
        if request is not None:
            return await _encode_in_worker(request)
        return tok.encode(text, add_special_tokens, split_special_tokens=split_special_tokens)
    await _prepare_rule3(tok)
    ids: list[int] = []
    offload = True
    try:
        for start in range(0, len(text), chunk_chars):
            encoder.feed(text[start : start + chunk_chars], ids)
            if offload and encoder.pending_chars > OFFLOAD_CHARS:
                request = _worker_request(tok, text, add_special_tokens, split_special_tokens)
                if request is not None:
                    return await _encode_in_worker(request)
                offload = False  # (not picklable: the slices go on, on the loop)
            await asyncio.sleep(0)
        return encoder.finish(ids)
    except ValueError as error:  # a lone surrogate, at its index in a slice: give it in text
        raise surrogate_error(text, error) from None


async def _prepare_rule3(tok: Tokenizer) -> None:
    """Makes the tokenizer's rule 3 structures (``StreamPlan.growing_piece``) in slices of their own.

    A stream makes them at its first piece past ``interior_min`` characters, inside a ``feed``: the
    first ``async_encode`` of a long run on a fresh tokenizer held the loop about 62 ms in that
    slice, against about 11 ms for every later call (a bug hunt). Made here for any text long
    enough to be sliced, once per tokenizer (about 50 ms of CPU in all), since which text holds
    such a piece is only known inside a ``feed``: the tokens grouped by their first bytes
    (``LongPieces.build_in_steps``; the vocabulary's sort before, in steps), then the scanner's
    probes (one step of about 13 ms).
    """
    plan = plan_of(tok)
    if plan.growing is not None:
        return
    for _ in plan.long_pieces.build_in_steps():
        await _let_timers_run()
    plan.growing_piece()
    await _let_timers_run()


async def _let_timers_run() -> None:
    """Yields until a task whose timer fell due meanwhile has run: the loop runs the timer's
    callback in one turn and that task's step in the next, and this task, scheduled first, runs
    first in both (one ``sleep(0)`` left a 1 ms ticker waiting through three build steps)."""
    for _ in range(3):
        await asyncio.sleep(0)


# ==== A worker process for texts holding one enormous piece ====


def _worker_request(tok: Tokenizer, text: str, add_special_tokens: bool, split_special_tokens: bool) -> bytes | None:
    """The pickled call for ``_encode_in_worker``, or None where ``tok`` cannot be pickled: built
    in memory, or its file changed or gone since it was loaded (the encode then stays on the
    loop; a removed file raised PicklingError here; a bug hunt)."""
    if not tok._source:
        return None
    try:
        return pickle.dumps((tok, text, add_special_tokens, split_special_tokens), protocol=pickle.HIGHEST_PROTOCOL)
    except pickle.PicklingError:
        return None


_WORKER_MAIN = "import sys; sys.path[:] = sys.argv[1:]; from peek2.serving.encode_worker import main; sys.exit(main())"
"""The worker's program: its import path is given in its arguments."""


async def _encode_in_worker(request: bytes) -> list[int]:
    """The ids of a ``_worker_request`` from a new process (``peek2.serving.encode_worker``), the loop free meanwhile."""
    import peek2

    # The child imports the same peek2 as this process, wherever it was found: isolated (-I: no
    # working directory, PYTHONPATH or user site on its path; with -m the working directory came
    # first, and a peek2 folder there was imported instead; a bug hunt), on this process's path
    # with peek2's own folder first.
    home = os.path.dirname(os.path.dirname(os.path.abspath(peek2.__file__)))
    path = [home, *(p for p in sys.path if p and p != home)]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        _WORKER_MAIN,
        *path,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await process.communicate(request)
    except BaseException:  # cancelled: nobody waits for this text any more
        if process.returncode is None:
            process.kill()
        await process.communicate()  # reaps it and closes its pipes
        raise
    if process.returncode != 0:
        raise RuntimeError(f"peek2's encode worker failed (exit {process.returncode}): {err.decode(errors='replace')[-2000:]}")
    kind, value = pickle.loads(out)
    if kind == "error":
        raise value
    packed = memoryview(value).cast(IDS_TYPECODE)
    ids: list[int] = []
    for start in range(0, len(packed), CHUNK_IDS):  # (the ints made in slices, as async_decode's text)
        ids += packed[start : start + CHUNK_IDS].tolist()
        await asyncio.sleep(0)
    return ids


async def async_encode_batch(
    tok: Tokenizer,
    texts: Iterable[str],
    add_special_tokens: bool = True,
    *,
    split_special_tokens: bool = False,
    chunk_chars: int = CHUNK_CHARS,
) -> list[list[int]]:
    """``tok.encode_batch(texts, ...)``, yielding to the loop every ``chunk_chars`` characters in all.

    Takes and refuses what ``encode_batch`` does, with its messages (a set or a dict of texts was
    encoded in hash order, and a bad text was not named; a bug hunt).
    """
    check_texts(texts, "async_encode_batch")
    add_special_tokens = as_flag(add_special_tokens, "add_special_tokens")
    split_special_tokens = as_flag(split_special_tokens, "split_special_tokens")
    _check_chunk(chunk_chars, "chunk_chars")
    out: list[list[int]] = []
    since_yield = 0
    for k, text in enumerate(texts):
        try:
            if isinstance(text, str) and len(text) > chunk_chars:
                out.append(await async_encode(tok, text, add_special_tokens, split_special_tokens=split_special_tokens, chunk_chars=chunk_chars))
                continue
            out.append(tok.encode(text, add_special_tokens, split_special_tokens=split_special_tokens))
        except (TypeError, ValueError) as error:
            raise text_error(k, error) from None
        since_yield += len(text) + 16  # many short texts cost their calls too
        if since_yield >= chunk_chars:
            since_yield = 0
            await asyncio.sleep(0)
    return out


async def async_decode(
    tok: Tokenizer, ids: Iterable[SupportsIndex], skip_special_tokens: bool = True, *, chunk_ids: int = CHUNK_IDS
) -> str:
    """``tok.decode(ids, ...)``, yielding to the event loop every ``chunk_ids`` ids.

    Takes and refuses what ``decode`` does, with its messages (a set, a dict or an array of bools
    was decoded; a bug hunt). The ids are taken ``chunk_ids`` at a time (a NumPy array sliced, an
    iterator drawn from), so no slice converts more of them (one ``tolist()`` or ``list(ids)`` of
    the whole input held the loop in proportion to it; a bug hunt). The final join of the text's
    parts is the one step that grows with the input: one copy of the text (docs/serving.md).
    """
    check_ids(ids)
    _check_chunk(chunk_ids, "chunk_ids")
    slices = _id_slices(ids, chunk_ids)
    first = next(slices, [])
    if len(first) < chunk_ids:  # all of them: one call
        return tok.decode(first, skip_special_tokens)
    decoder = StreamDecoder(tok, skip_special_tokens)
    parts = [decoder.feed(first)]
    await asyncio.sleep(0)
    for part in slices:  # (drawn after the yield: it is this slice's work)
        parts.append(decoder.feed(part))
        await asyncio.sleep(0)
    parts.append(decoder.finish())
    return "".join(parts)


def _id_slices(ids: Iterable[SupportsIndex], size: int) -> Iterator[Sequence[SupportsIndex]]:
    """``ids`` in slices of ``size``: a list, tuple or array cut in place, anything else (an
    iterator, a deque, which is a Sequence that cannot be sliced; a bug hunt) drawn from."""
    if isinstance(ids, (list, tuple)) or is_array(ids):
        values: list[SupportsIndex] = ids  # type: ignore[assignment]  # (sliced, never changed)
        for start in range(0, len(values), size):
            yield values[start : start + size]
        return
    it = iter(ids)
    while part := list(islice(it, size)):
        yield part


def _check_chunk(value: int, name: str) -> None:
    check_count(value, name, 1)
