"""Token ids -> the character span of each, compiled: the usual case of ``Tokenizer.encode_with_offsets``.

Where a text reaches the merger unchanged (no normalizer, or NFC that leaves it as it is), the
bytes of its ids are its UTF-8, in order, so the span of a token follows from the byte lengths
of the tokens before it alone: one walk over the ids and the text's UTF-8, counting the bytes
that start a character. A token that holds part of a character's bytes spans that whole
character, as in tokenizers.

Performance notes (the 1 MB corpora of scripts/corpora.py, ``python scripts/bench_offsets.py``,
medians of 5, the other core busy): the interpreted path (a span tuple per character of the text,
then per piece the merger's ids and a character per byte) ran at 0.6-1.9x tokenizers' ``encode``;
the compiled encode of the whole segment and this walk ran at 8.0-11.3x (Llama-3.2) and 3.5-10.3x
(Qwen3, whose XNLI text NFC changes here and there: ``peek2.normalize.aligned.nfc_aligned`` aligns only the
blocks that change), about half the speed of ``encode`` without offsets: the rest is the tuples. A span's start is
the previous span's end object where they are equal (Llama-3.2, 1 MB of English, 214K tokens,
best of 9: 50.5 -> 41.4 ms, 29.2 -> 22.4 MB held; ``encode`` alone 10 ms). What remains is the
tuples themselves: ``list(zip(...))`` of 214K pairs of shared ints costs 15-17 ms in C, 10.6 ms
of it with the garbage collector paused (its passes over the new tuples are paid later anyway).
"""

from __future__ import annotations

from typing import Any, Final, Sequence

from mypy_extensions import i64

from librt.vecs import append, vec

from peek2.pretokenize.scanner import boxed_int


def char_spans(
    lengths: vec[i64],
    id_bytes: tuple[bytes | None, ...],
    ids: list[int],
    first: i64,
    text: str,
    source: list[int] | None,
    base: i64,
    offsets: list[Any],
) -> bool:
    """Append to ``offsets`` the span of each of ``ids[first:]``, the ids of ``text``; ``lengths`` is
    ``token_lengths`` of the vocabulary (filled here from ``id_bytes``). Character ``c`` of ``text`` is character ``base + c`` of
    the caller's text, or ``source[c]`` of it when ``source`` is given (what a normalizer made of
    it: a token spans from the source of its first character to that of its last). False, with
    ``offsets`` partly appended, when the ids' bytes do not add up to the text's UTF-8 (the caller
    then takes the general path)."""
    total: i64 = len(text.encode("utf-8"))
    chars: i64 = len(text)
    known: i64 = len(lengths)
    count: i64 = 0  # characters started before ``at``
    at: i64 = 0
    # The int object of the last span's end, given again as the next span's start where they are
    # equal (the usual case: one int object a token, not two).
    end_box: object = None
    end_value: i64 = -1
    for k in range(first, len(ids)):
        token: i64 = ids[k]
        if token < 0 or token >= known:
            return False
        packed = lengths[token]
        if packed == UNKNOWN:
            packed = token_length(id_bytes[token])
            lengths[token] = packed
        end = at + (packed >> _SIZE_SHIFT)
        if end <= at or end > total:
            return False
        start = count - (packed & 1)
        count += (packed >> 1) & _STARTS_MASK
        if start < 0 or count > chars:
            return False
        span_start: i64 = base + start
        span_end: i64 = base + count
        if source is not None:
            span_start = base + source[start]
            span_end = base + source[count - 1] + 1
        start_box: object = end_box if span_start == end_value else boxed_int(span_start)
        end_box = boxed_int(span_end)
        end_value = span_end
        offsets.append((start_box, end_box))
        at = end
    return at == total and count == chars


_SIZE_SHIFT: Final = 32
_STARTS_MASK: Final = (1 << 31) - 1


_CONTINUATION_BYTES: Final = bytes(range(0x80, 0xC0))


UNKNOWN: Final = -1  # a token ``char_spans`` has not met yet


def token_lengths(size: i64) -> vec[i64]:
    """What ``char_spans`` knows of each of ``size`` ids: UNKNOWN until it meets the token, then
    ``token_length`` of its bytes.

    (Filled as tokens are met: the whole vocabulary read at a tokenizer's first
    ``encode_with_offsets`` took 16-18 ms for 128-200K tokens, most of it reaching each token's
    bytes for the first time since the load, where ``tokenizers``' first ``encode`` of 20 KB
    takes 9 ms.)"""
    return vec[i64]([UNKNOWN] * size)


def token_length(data: bytes | None) -> i64:
    """A token's length in bytes, the number of its bytes that start a UTF-8 character, and
    whether its first byte continues one (a token that begins inside a character spans that
    whole character), packed as ``size << 32 | starts << 1 | continues``; 0 for no bytes."""
    if data is None or not data:
        return 0
    size: i64 = len(data)
    starts: i64 = size
    if not data.isascii():
        starts = len(data.translate(None, _CONTINUATION_BYTES))
    continues: i64 = 0
    if (data[0] & 0xC0) == 0x80:
        continues = 1
    return size << _SIZE_SHIFT | starts << 1 | continues


def trim_spans(
    ids: list[int], offsets: list[Any], first: i64, id_bytes: tuple[bytes | None, ...], held: set[int], steps: list[tuple[bool, bool]]
) -> list[int]:
    """A ``ByteLevel`` post-processor's ``trim_offsets`` of the vocabulary tokens of ``ids[first:]``:
    each span leaves out the token's leading and trailing spaces, step by step
    (``Tokenizer._trim_offsets`` says how); returns the places of the ids in ``held`` (the added
    tokens'), which the caller trims.

    Performance notes: interpreted, the loop took 0.33 s of a 0.48 s ``encode_with_offsets`` of
    80,000 spaces with GPT-2's ranks (a token each, every one trimmed), 0.44-0.62x tokenizers (a
    bug hunt); compiled, with the spaces counted in place, it is a small part of the call.
    """
    left: list[int] = []
    n: i64 = len(ids)
    for k in range(first, n):
        token_id = ids[k]
        if token_id in held:
            left.append(k)
            continue
        data = id_bytes[token_id]
        if data is None:
            continue
        size: i64 = len(data)
        leading: i64 = 0
        while leading < size and data[leading] == 32:
            leading += 1
        trailing: i64 = 0
        while trailing < size and data[size - 1 - trailing] == 32:
            trailing += 1
        if leading == 0 and trailing == 0:
            continue
        span = offsets[k]
        start: i64 = span[0]
        end: i64 = span[1]
        for keep_prefix_space, after_cls in steps:
            if leading > 0:
                first_one = k == 0 if after_cls else k == first
                if (first_one or start == 0) and keep_prefix_space and leading == 1:
                    start = min(start, end)
                else:
                    start = min(start + leading, end)
            if trailing > 0 and end >= trailing:
                end = max(end - trailing, start)
        offsets[k] = (start, end)
    return left
