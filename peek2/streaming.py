"""Streaming encode and decode: ids as soon as they are final, text as soon as it is whole.

``StreamEncoder`` is fed text chunks (``str``, or ``bytes`` cut anywhere, even inside a UTF-8
sequence) and returns the ids that no later text can change; ``finish()`` flushes the rest.
The ids of all calls, concatenated, equal ``Tokenizer.encode(whole_text)`` for every way of
cutting the text (tests/test_streaming.py checks this against the full encode).

``StreamDecoder`` is fed ids and returns the text of the complete UTF-8 characters they end;
the concatenation equals ``Tokenizer.decode(all_ids)``.

>>> enc = tok.stream_encoder()                                # doctest: +SKIP
>>> [enc.feed("Hello wor"), enc.feed(b"ld \\xe4\\xbd"), enc.feed(b"\\xa0"), enc.finish()]  # doctest: +SKIP
[[9906], [1917], [], [118195]]
>>> dec = tok.stream_decoder()                                # doctest: +SKIP
>>> [dec.feed(i) for i in tok.encode("hé", add_special_tokens=False)]  # doctest: +SKIP
['h', 'é']

When is a piece final? The text is held in two buffers:

- ``raw``: text before normalization and added-token matching, kept while a later chunk could
  still change how it is cut into segments: a suffix that is the start of an added token
  ("<|eot" of "<|eot_id|>"; a whole token at the very end too, since a longer one or a
  ``single_word``/``rstrip`` rule may need the next character), whitespace an ``lstrip`` token
  could absorb, whitespace an ``rstrip`` token is absorbing, and (NFC normalizers) the last run
  that a following combining mark or Hangul jamo could compose with;
- ``text``: normalized text of the current segment, starting at a piece boundary, not yet
  encoded. A prefix ``text[:c]`` is encoded as soon as ``c`` is a boundary that no later text
  can move. Two rules find one:

  1. local (checked on the last ``LOCAL_WINDOW`` characters, the common case): the categories
     of ``text[c-1]`` and ``text[c]`` alone force a piece boundary at ``c`` whatever follows:
     a letter then a non-letter (``\\p{L}+`` stops; no other alternative holds a letter);
     a number then a non-number, or any two numbers where pieces take one number (Qwen);
     a non-whitespace character then a whitespace other than CR/LF (no alternative runs from
     non-whitespace into whitespace except ``[\\r\\n]*`` after punctuation). Every alternative
     of the patterns decides its end from the characters it holds and the one after it, so
     the pieces before ``c`` do not depend on anything past ``text[c]``.
  2. the scanner (when no local boundary is found and the pending text has doubled since the
     last try): a piece ``[s, e)`` with ``e < len(text)`` is final unless both its last
     character and ``text[e]`` are whitespace (a whitespace run's pieces depend on where the
     run ends: ``\\s*[\\r\\n]+`` takes up to its last newline, ``\\s+(?!\\S)`` all but its last
     character). This catches Llama-3's digit groups (``\\p{N}{1,3}``) inside long numbers.

Memory bound: after every ``feed``, the pending text is what follows the last boundary rule 1
can prove: the unfinished piece and its one character of lookahead, plus at most the few final
pieces rule 1 cannot see (a space before a digit or punctuation); once that reaches
``RESCAN_MIN`` characters, rule 2 cuts it to the unfinished piece (it waits for the pending text
to double between tries, so the pending text stays below ``max(RESCAN_MIN, 2 x unfinished
piece)``). Add at most the longest added token (a partial match), the whitespace before it
(``lstrip`` tokens only), a word character before a ``single_word`` token, and one NFC run.
``pending_chars`` reports it; on XNLI fed in 97-character chunks it never exceeds 64 characters.

One enormous piece (a megabyte of "=" or of spaces, a CJK clause without punctuation) is held
whole until it ends, because its ids depend on all of it; it grows in place (no quadratic
copies), rule 2 runs only when it doubles, and it is encoded in one call when it ends, so the
work stays linear in the input. A long run of combining marks is held the same way (NFC).
"""

from __future__ import annotations

import codecs
import weakref
from typing import TYPE_CHECKING, Iterable, Union

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2._scan import final_boundary
from peek2.tokenizer import WHITESPACE, _is_word_char

if TYPE_CHECKING:
    from peek2.tokenizer import Tokenizer

LOCAL_WINDOW = 64
"""Characters searched backwards from the end of the pending text for a local boundary (rule 1)."""

RESCAN_MIN = 1024
"""Pending characters before the scanner (rule 2) is asked for a boundary; then each doubling."""

Chunk = Union[str, bytes, bytearray, memoryview]

_NO_MEMO = (-1, -1, -1)


class _Plan:
    """What a tokenizer's added tokens and normalizer mean for streaming (built once per tokenizer)."""

    def __init__(self, tok: Tokenizer) -> None:
        if tok._normalized_matcher.first_chars:
            # Tokens matched after normalization would need a second partial-match buffer on the
            # normalized text; none of the supported models has one (all are "normalized": false).
            raise NotImplementedError(
                "streaming encode does not support added tokens with normalized=true "
                f"({sorted(tok._normalized_matcher.by_content)[:3]}...)"
            )
        self.stage2: bytes = tok._engine.stage2
        self.one_digit: bool = tok._engine.max_digits == 1
        self.nfc: bool = tok.spec.normalizer == "NFC"
        tokens = list(tok._raw_matcher.by_content.values())
        contents = [t.content for t in tokens if t.content]
        # Every non-empty prefix of every token, the whole token included (see the module notes).
        self.prefixes: frozenset[str] = frozenset(c[:k] for c in contents for k in range(1, len(c) + 1))
        self.first_chars: frozenset[str] = frozenset(c[0] for c in contents)
        self.max_len: int = max((len(c) for c in contents), default=0)
        self.lstrip: bool = any(t.lstrip for t in tokens)
        self.rstrip_ids: frozenset[int] = frozenset(t.id for t in tokens if t.rstrip)
        # single_word tokens look at the character before a match: never cut just before one.
        self.single_first: frozenset[str] = frozenset(t.content[0] for t in tokens if t.single_word and t.content)


_PLANS: weakref.WeakKeyDictionary[Tokenizer, _Plan] = weakref.WeakKeyDictionary()


def plan_of(tok: Tokenizer) -> _Plan:
    plan = _PLANS.get(tok)
    if plan is None:
        plan = _PLANS[tok] = _Plan(tok)
    return plan


# ==== NFC: where a normalization run may be cut ====

_NFC_STICKY: frozenset[str] | None = None


def _nfc_sticky() -> frozenset[str]:
    """Characters that NFC may join to what comes before them (no cut is safe just before one).

    A cut before ``c`` is safe when ``c`` has combining class 0, its decomposition starts with
    a class-0 character, and it is never the second character of a canonical composition
    (Hangul vowel and trailing jamo included). Built once, from ``unicodedata2`` (the pinned
    Unicode 16 data; scalars newer than the reference's 9.0 are only ever made stickier, so
    the rule stays safe).
    """
    global _NFC_STICKY
    if _NFC_STICKY is None:
        sticky: set[str] = set()
        for cp in range(0x80, 0x30000):  # above: no combining class or decomposition in Unicode 16
            char = chr(cp)
            if unicodedata2.combining(char):
                sticky.add(char)
                continue
            decomposition = unicodedata2.decomposition(char)
            if not decomposition or decomposition.startswith("<"):
                continue
            parts = [chr(int(p, 16)) for p in decomposition.split()]
            if unicodedata2.combining(parts[0]) or unicodedata2.normalize("NFD", parts[0]) != parts[0]:
                sticky.add(char)
            if len(parts) == 2:
                sticky.add(parts[1])  # may compose with what precedes it
        sticky.update(chr(cp) for cp in range(0x1161, 0x1176))  # Hangul V jamo
        sticky.update(chr(cp) for cp in range(0x11A8, 0x11C3))  # Hangul T jamo
        _NFC_STICKY = frozenset(sticky)
    return _NFC_STICKY


# ==== Encoding ====


def _output_list(out: list[int] | None) -> list[int]:
    """The list ``feed``/``finish`` append to: the caller's, or a new one."""
    if out is None:
        return []
    if type(out) is not list:
        raise TypeError(f"out must be a list, not {type(out).__name__}")
    return out


class StreamEncoder:
    """Encodes text fed in chunks; ``feed`` returns the ids that are final, ``finish`` the rest.

    Made by ``Tokenizer.stream_encoder``; one object per text. The ids of all calls, in order,
    equal ``tok.encode(whole_text, add_special_tokens, split_special_tokens=...)``.

    >>> enc = tok.stream_encoder()                               # doctest: +SKIP
    >>> ids = []
    >>> for chunk in (b"caf\\xc3", b"\\xa9 12", b"34 <|eot", b"_id|>"):  # doctest: +SKIP
    ...     ids += enc.feed(chunk)
    >>> ids += enc.finish()                                      # doctest: +SKIP
    >>> ids == tok.encode("café 1234 <|eot_id|>", add_special_tokens=False)  # doctest: +SKIP
    True

    Raises (from ``feed``/``finish``):
        TypeError: a chunk that is not str or bytes-like.
        UnicodeDecodeError (ValueError): invalid UTF-8 bytes, or ``finish`` inside a sequence.
        ValueError: a str fed while a UTF-8 sequence from bytes is incomplete; a lone surrogate.
        RuntimeError: ``feed`` or ``finish`` after ``finish``.
    """

    def __init__(self, tokenizer: Tokenizer, add_special_tokens: bool = False, *, split_special_tokens: bool = False) -> None:
        self._tok = tokenizer
        self._plan = plan_of(tokenizer)
        self._engine = tokenizer._engine
        self._split_special = bool(split_special_tokens)
        self._add_special = bool(add_special_tokens)
        self._utf8: codecs.IncrementalDecoder | None = None
        self._raw = ""  # raw text whose segmentation or normalization may still change
        self._text = ""  # normalized text of the open segment, from a piece boundary, not encoded
        self._started = False
        self._finished = False
        self._rescan_at = RESCAN_MIN
        self._nfc_memo = _NO_MEMO  # (start, result, segment start) of the last NFC walk back
        plan = self._plan
        self._plain = not (plan.nfc or plan.lstrip or plan.single_first)
        self._needles = tuple(tokenizer._raw_matcher.needles)

    @property
    def pending_chars(self) -> int:
        """Characters held back (raw and normalized): the streaming memory bound in use."""
        return len(self._raw) + len(self._text)

    def feed(self, chunk: Chunk, out: list[int] | None = None) -> list[int]:
        """Add ``chunk`` to the text; return the ids that no later chunk can change.

        With ``out`` (a list), the ids are appended to it and ``out`` is returned: no list is
        made, copied and freed per chunk, which is what a caller collecting every id wants
        (``enc.feed(chunk, ids)`` instead of ``ids += enc.feed(chunk)``: 1 KB chunks of
        English 0.87-0.89x -> 0.96-1.00x the speed of one ``encode``, scripts/bench_serving.py
        (b)). If the call raises, ``out`` is left as it was.
        """
        if self._finished:
            raise RuntimeError("feed() after finish(): make a new stream_encoder() for a new text")
        if isinstance(chunk, str):
            if self._utf8 is not None and self._utf8.getstate()[0]:
                raise ValueError("a str chunk was fed while a UTF-8 sequence from bytes is incomplete")
            text = chunk
        elif isinstance(chunk, (bytes, bytearray, memoryview)):
            if self._utf8 is None:
                self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
            text = self._utf8.decode(chunk if type(chunk) is bytes else bytes(chunk))
        else:
            raise TypeError(f"chunk must be str or bytes, not {type(chunk).__name__}")
        if out is None:
            out = []
        elif type(out) is not list:
            out = _output_list(out)  # raises TypeError
        mark = len(out)
        try:
            if not self._started:
                self._start(out)
            if not text:
                return out
            if self._plain and not self._raw and not self._may_start_token(text):
                # The usual chunk: no normalizer or whitespace rule to respect and no added token can
                # start in it, so all of it is final at the raw level (what _advance would conclude,
                # for a third of the per-chunk cost: 1 KB chunks of English 0.85x -> 0.9x one-shot).
                pending, self._text = self._text, ""
                pending += text  # in place (see below)
                self._text = pending
                self._encode_final(out)
                return out
            raw, self._raw = self._raw, ""
            raw += text  # the only reference: CPython grows the string in place (no quadratic copies)
            self._raw = raw
            self._advance(out, False)
            return out
        except BaseException:
            del out[mark:]
            raise

    def finish(self, out: list[int] | None = None) -> list[int]:
        """The remaining ids (and the post-processor's suffix ids when ``add_special_tokens``).

        ``out`` as in ``feed``: the ids are appended to it and ``out`` is returned.
        """
        if self._finished:
            raise RuntimeError("finish() was already called")
        out = _output_list(out)
        mark = len(out)
        try:
            self._start(out)
            if self._utf8 is not None:
                self._raw += self._utf8.decode(b"", final=True)
            self._finished = True
            self._advance(out, True)
            if self._add_special:
                out += self._tok._suffix_ids
            return out
        except BaseException:
            del out[mark:]
            raise

    def _start(self, out: list[int]) -> None:
        """The post-processor's prefix ids go first, at the first call."""
        if not self._started:
            self._started = True
            if self._add_special:
                out += self._tok._prefix_ids

    # The state the prompt cache keeps at a checkpoint (peek2.incremental).
    def _snapshot(self) -> tuple[str, str, bool, int]:
        if self._utf8 is not None:
            raise ValueError("a checkpoint of an encoder fed bytes is not supported")
        return (self._raw, self._text, self._started, self._rescan_at)

    def _restore(self, state: tuple[str, str, bool, int]) -> None:
        self._raw, self._text, self._started, self._rescan_at = state
        self._nfc_memo = _NO_MEMO

    def _advance(self, out: list[int], final: bool) -> None:
        """Move what is final from ``raw`` into ``text``, and encode what is final in ``text``."""
        raw = self._raw
        segments = self._tok._raw_matcher.split(raw, self._split_special)
        limit = len(raw) if final else self._raw_limit(raw, segments)
        normalize = self._tok._normalize
        at = 0
        if not self._plan.nfc and len(segments) == 1 and segments[0][1] < 0:
            segments = []  # the usual chunk: one text segment and no normalizer, moved below at once
            text = self._text
            self._text = text + raw[:limit] if limit < len(raw) else text + raw
        for segment, token_id in segments:
            end = at + len(segment)
            if end <= limit:
                if token_id >= 0:
                    self._flush(out)  # the open segment ends at an added token
                    out.append(token_id)
                else:
                    self._append(normalize(segment))
            else:
                if token_id < 0 and at < limit:
                    self._append(normalize(segment[: limit - at]))
                break
            at = end
        if limit:
            self._raw = raw[limit:]
            self._nfc_memo = _NO_MEMO  # positions in raw moved
        else:
            self._raw = raw
        if final:
            self._flush(out)
            return
        self._encode_final(out)

    def _may_start_token(self, text: str) -> bool:
        """True when an added token, or the start of one, may be in ``text``."""
        if text[-1] in self._plan.first_chars:
            return True  # perhaps the first character of a token the next chunk completes
        for needle in self._needles:
            if needle[0] in text and needle in text:  # (see Tokenizer._plain)
                return True
        return False

    def _encode_final(self, out: list[int]) -> None:
        """Encode the pending text up to its last final piece boundary."""
        cut = self._piece_cut()
        if cut:
            text = self._text
            self._engine.encode(text[:cut], out)
            self._text = text[cut:]
            self._rescan_at = max(RESCAN_MIN, 2 * len(self._text))

    def _append(self, normalized: str) -> None:
        text, self._text = self._text, ""
        text += normalized  # in place while one enormous piece grows (see feed)
        self._text = text

    def _flush(self, out: list[int]) -> None:
        if self._text:
            self._engine.encode(self._text, out)
            self._text = ""
        self._rescan_at = RESCAN_MIN

    def _raw_limit(self, raw: str, segments: list[tuple[str, int]]) -> int:
        """How much of ``raw`` later text cannot change (see the module notes)."""
        plan = self._plan
        n = len(raw)
        limit = n
        if plan.max_len:
            # A suffix that is (the start of) an added token: a longer token, the rest of this one,
            # or the character a single_word/rstrip rule needs may still come.
            window = max(0, n - plan.max_len)
            prefixes = plan.prefixes
            for first in plan.first_chars:
                k = raw.find(first, window, limit)
                while k >= 0:
                    if raw[k:] in prefixes:
                        limit = k
                        break
                    k = raw.find(first, k + 1, limit)
            if plan.lstrip:  # a token at ``limit`` or later may absorb the whitespace before it
                while limit > 0 and raw[limit - 1] in WHITESPACE:
                    limit -= 1
        if len(segments) == 1 and segments[0][1] < 0 and not plan.nfc and not plan.single_first:
            return limit  # one text segment, nothing else to respect (the usual chunk)
        while True:
            moved = self._segment_limit(raw, segments, limit)
            if plan.single_first:
                # (at the end too: the next chunk may start with such a token)
                while 0 < moved and (moved == n or raw[moved] in plan.single_first) and _is_word_char(raw[moved - 1]):
                    moved -= 1
            if moved == limit:
                return limit
            limit = moved

    def _segment_limit(self, raw: str, segments: list[tuple[str, int]], limit: int) -> int:
        """``limit`` moved back out of matched tokens, an rstrip at the end, and NFC runs."""
        plan = self._plan
        n = len(raw)
        at = 0
        for segment, token_id in segments:
            end = at + len(segment)
            if token_id >= 0:
                if at < limit < end:
                    limit = at  # never cut inside a matched token
                if end == n and token_id in plan.rstrip_ids:
                    limit = min(limit, at)  # its whitespace absorption may go on
            elif plan.nfc and at < limit and (limit < end or limit == n):
                # Cut only before a character NFC cannot join to what precedes it; at the very end,
                # keep the last such run pending (a later combining mark or jamo may join it).
                sticky = _nfc_sticky()
                k = limit if limit < n else n - 1
                start = k
                memo_start, memo_k, memo_at = self._nfc_memo
                while k > at and raw[k] in sticky:
                    if k == memo_start and at == memo_at:
                        k = memo_k  # walked last time, over the same raw text: keeps long runs linear
                        break
                    k -= 1
                self._nfc_memo = (start, k, at)
                limit = k
            at = end
        return limit

    def _piece_cut(self) -> int:
        """The largest final piece boundary in the pending text (0 if none is known yet)."""
        text = self._text
        n = len(text)
        if n < 2:
            return 0
        cut = final_boundary(text, self._plan.stage2, self._plan.one_digit, LOCAL_WINDOW)
        if cut:
            return cut
        if n < self._rescan_at:
            return 0
        self._rescan_at = 2 * n  # amortised: the scanner runs again only when the text has doubled
        ends = self._tok.pattern.split_ends(text)
        for k in range(len(ends) - 1, -1, -1):
            end = ends[k]
            if end < n and not (text[end - 1] in WHITESPACE and text[end] in WHITESPACE):
                return end
        return 0


# ==== Decoding ====


class StreamDecoder:
    """Decodes ids fed one (or a list) at a time; returns only complete UTF-8 characters.

    Made by ``Tokenizer.stream_decoder``. The strings returned by all ``feed`` calls and
    ``finish``, joined, equal ``tok.decode(all_ids, skip_special_tokens)`` (invalid UTF-8 becomes
    U+FFFD exactly where ``decode`` puts it). Each id costs one table lookup and an incremental
    UTF-8 step over its bytes: constant time, whatever the length of the output so far.

    ``prefill`` (prompt ids) sets the state without returning their text: the text returned
    afterwards is what the new ids add, starting with the rest of a character the prompt left
    incomplete.

    >>> dec = tok.stream_decoder()                 # doctest: +SKIP
    >>> dec.feed(tok.encode("你", add_special_tokens=False))  # doctest: +SKIP
    '你'

    Raises (from ``feed``):
        TypeError: an id that is not an int, or ids that are not a sequence of int.
        ValueError: an id that is negative or not in the vocabulary.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False, *, prefill: Iterable[int] = ()) -> None:
        self._table = tokenizer._id_bytes
        self._skip = tokenizer._special_ids if skip_special_tokens else frozenset()
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        if isinstance(prefill, (str, bytes)) or not isinstance(prefill, Iterable):
            raise TypeError(f"prefill must be a sequence of int, not {type(prefill).__name__}")
        self._utf8.decode(self._bytes(list(prefill)))  # sets the state; the prompt's text is not returned

    def feed(self, token_ids: int | Iterable[int]) -> str:
        """The text completed by ``token_ids`` (one id or several); "" while a character is incomplete."""
        if isinstance(token_ids, int) and not isinstance(token_ids, bool):
            return self._utf8.decode(self._lookup(token_ids))
        if isinstance(token_ids, (str, bytes)) or not isinstance(token_ids, Iterable):
            raise TypeError(f"token_ids must be an int or a sequence of int, not {type(token_ids).__name__}")
        return self._utf8.decode(self._bytes(token_ids))

    def finish(self) -> str:
        """The rest: U+FFFD for a UTF-8 sequence the ids left incomplete (as ``decode`` does)."""
        return self._utf8.decode(b"", final=True)

    @property
    def pending_bytes(self) -> int:
        """Bytes of an incomplete character held back (at most 3)."""
        return len(self._utf8.getstate()[0])

    def _lookup(self, token_id: int) -> bytes:
        table = self._table
        data = table[token_id] if 0 <= token_id < len(table) else None
        if data is None:
            raise ValueError(f"token id {token_id} is not in the vocabulary (0..{len(table) - 1})")
        return b"" if token_id in self._skip else data

    def _bytes(self, token_ids: Iterable[int]) -> bytes:
        parts = []
        for token_id in token_ids:
            if not isinstance(token_id, int) or isinstance(token_id, bool):
                raise TypeError(f"ids must be int, not {type(token_id).__name__} ({token_id!r})")
            parts.append(self._lookup(token_id))
        return b"".join(parts)
