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
  could absorb, never the inside of a match (a discarded ``single_word`` match uses up its text;
  a match may start in the whitespace an ``rstrip`` token took), and (NFC normalizers) the last run
  that a following combining mark or Hangul jamo could compose with (a run starts before a
  character that nothing before it can take: ``stream_engine._nfc_cut_before``). Whitespace an
  ``rstrip`` token is absorbing is not held: the token is sent, and the text after it is matched
  as after that token (``absorbed``: ``StreamEngine._raw_limit``);
- ``text``: normalized text of the current segment, starting at a piece boundary, not yet
  encoded. A prefix ``text[:c]`` is encoded as soon as ``c`` is a boundary that no later text
  can move. Three rules find one:

  1. local (checked on the last ``LOCAL_WINDOW`` characters, the common case): the categories
     of ``text[c-1]`` and ``text[c]`` alone force a piece boundary at ``c`` whatever follows:
     a letter then a non-letter (``\\p{L}+`` stops; no other alternative holds a letter);
     a number then a non-number, or any two numbers where pieces take one number (Qwen);
     a non-whitespace character then a whitespace other than CR/LF (no alternative runs from
     non-whitespace into whitespace except ``[\\r\\n]*`` after punctuation). Every alternative
     of the patterns decides its end from the characters it holds and the one after it, so
     the pieces before ``c`` do not depend on anything past ``text[c]``.
  2. the scanner (when no local boundary is found and the pending text has doubled since the
     last try): a piece ``[s, e)`` with ``e + 3 <= len(text)`` is final unless both its last
     character and ``text[e]`` are whitespace (a whitespace run's pieces depend on where the
     run ends: ``\\s*[\\r\\n]+`` takes up to its last newline, ``\\s+(?!\\S)`` all but its last
     character); the three characters after it are those of the longest contraction, which may
     still join it (o200k's ``x'`` then ``s``; GPT-2's ``'`` then ``ve``). This catches Llama-3's digit groups (``\\p{N}{1,3}``) inside long numbers.
  3. inside one growing piece (when the pending text passes ``StreamPlan.interior_min``, 16
     times the longest token's bytes, or 2 times in a stream finished again after each restore
     without NFC: ``INTERIOR_MIN_TOKENS_FINISHED_AGAIN``; and again after as much more, or after it has doubled
     following a failed try): the pending text is one piece for every probe (one scalar of each
     category after it), ends in a run of one category, and the scanner started inside that run
     ends the piece where it does from the start (or started at the piece's head, the text before
     the run, kept in front of the rest: ``StreamEngine.head``). ``peek2.bpe.growing_piece`` then finds a boundary
     of the piece's tokens that no continuation moves (an exact test: see there), the ids before
     it are sent, and the rest is kept as a piece that goes on (merged from its bytes when it
     ends, never looked up whole).

  The prefix ``text[:c]`` is then encoded as the pieces of ``text`` before ``c`` (the scanner
  sees the pending text past ``c``), not as a text of its own: the pieces of a whitespace run
  depend on the character after it (``" \\xa0!"`` is ``" "``, ``"\\xa0"``, ``"!"``; ``" \\xa0"``
  alone is one piece), and rule 2 may cut just after such a run.

Memory bound: after every ``feed``, the pending text is what follows the last boundary rule 1
can prove: the unfinished piece and its one character of lookahead, plus at most the few final
pieces rule 1 cannot see (a space before a digit or punctuation); once that reaches
``RESCAN_MIN`` characters, rule 2 cuts it to the unfinished piece (it waits for the pending text
to double between tries, so the pending text stays below ``max(RESCAN_MIN, 2 x unfinished
piece)``). Add at most the longest added token (a partial match), the whitespace before it
(``lstrip`` tokens only), a word character before a ``single_word`` token, and one NFC run.
``pending_chars`` reports it; on XNLI fed in 97-character chunks it never exceeds 64 characters.

Rule 3 keeps a run of spaces, newlines, ``=``, CJK letters or marks below ``interior_min`` plus
one chunk, and a whitespace run that keeps adding newlines too (its ``\\s*[\\r\\n]+`` piece grows
to the last one whatever follows), and a piece of several categories where the scanner is in one
of its loops (o200k's letters and marks in turn, Thai, DeepSeek-V3's Latin of two kinds, spaces
and tabs), the rest kept behind the scanner's ``resume_context``. Two runs are still held whole, because their ids depend on how
they end: whitespace after its last newline (a later newline changes all its pieces), and, with
NFC, a run of combining marks of several classes (canonical ordering moves later marks in front).
Such a run grows in place (no quadratic copies), rules 2 and 3 try again only when it doubles, and
it is encoded in one call when it ends, so the work stays linear in the input.
"""

from __future__ import annotations

import codecs
import copy
import operator
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, SupportsIndex, TypeVar, Union

from peek2.argument_checks import plain_int
from peek2.bpe.merger import as_flag
from peek2.serving.stream_engine import LOCAL_WINDOW, RESCAN_MIN, StreamEngine, StreamState, plan_of

if TYPE_CHECKING:
    from peek2.tokenizer import Tokenizer

__all__ = ["LOCAL_WINDOW", "RESCAN_MIN", "Branchable", "Chunk", "StreamDecoder", "StreamEncoder", "plan_of"]

Chunk = Union[str, bytes, bytearray, memoryview]


# ==== Encoding ====


_Copied = TypeVar("_Copied", bound="Branchable")


class Branchable:
    """What copying and pickling mean for the serving objects (stream encoder and decoder, prompt
    session, prompt cache): ``copy.copy`` is a branch that goes on apart from the original (each
    class's ``__copy__``), ``copy.deepcopy`` the same, sharing the tokenizer, which never changes
    (copying 100 MB of tables into every branch is not what a caller branching a conversation
    wants), and pickling is refused where the state belongs to this process's engine: ``PICKLE_ADVICE``
    says what to pickle instead (empty: pickled as any object)."""

    PICKLE_ADVICE: ClassVar[str] = ""

    def __deepcopy__(self: _Copied, memo: dict[int, object]) -> _Copied:
        return copy.copy(self)

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        if self.PICKLE_ADVICE:
            raise TypeError(f"a {type(self).__name__} cannot be pickled (its state is tied to this process's tokenizer): {self.PICKLE_ADVICE}")
        return super().__reduce_ex__(protocol)


class StreamEncoder(Branchable):
    """Encodes text fed in chunks; ``feed`` returns the ids that are final, ``finish`` the rest.

    Made by ``Tokenizer.stream_encoder``; one object per text. The ids of all calls, in order,
    equal ``tok.encode(whole_text, add_special_tokens, split_special_tokens=...)``. The work is
    done by a compiled ``peek2.serving.stream_engine.StreamEngine``; this class is its typed interface.

    >>> enc = tok.stream_encoder()                               # doctest: +SKIP
    >>> ids = []
    >>> for chunk in (b"caf\\xc3", b"\\xa9 12", b"34 <|eot", b"_id|>"):  # doctest: +SKIP
    ...     ids += enc.feed(chunk)
    >>> ids += enc.finish()                                      # doctest: +SKIP
    >>> ids == tok.encode("café 1234 <|eot_id|>", add_special_tokens=False)  # doctest: +SKIP
    True

    Raises (from ``feed``/``finish``):
        TypeError: a chunk that is not str or bytes-like; ``out`` that is not a list.
        UnicodeDecodeError (ValueError): invalid UTF-8 bytes, or ``finish`` inside a sequence.
        ValueError: a str fed while a UTF-8 sequence from bytes is incomplete; a lone surrogate
            (raised by the ``feed`` of its chunk, with its index in the chunk).
        RuntimeError: ``feed`` or ``finish`` after ``finish``, or after a call that an exception
            other than these (an interrupt, no memory) stopped half way.

    A call that raises for its chunk changes nothing: the stream is as it was before (nothing of
    the chunk applied, ``out`` as it was), so a server can reject one bad chunk and go on.
    """

    def __init__(self, tokenizer: Tokenizer, add_special_tokens: bool = False, *, split_special_tokens: bool = False) -> None:
        # (checked, not bool(): "no" read as true added the special tokens; a bug hunt)
        stream = self._stream = StreamEngine(tokenizer, as_flag(add_special_tokens, "add_special_tokens"), as_flag(split_special_tokens, "split_special_tokens"))
        if type(self).feed is _OWN_FEED:
            # The engine's own method, called without this class's frame in between (a stream fed
            # a character at a time spent about a sixth of its time in it). A subclass's feed, or
            # a patch of the class made before this encoder (a spy, a tracer), stays in charge.
            self.__dict__["feed"] = stream.feed

    @property
    def pending_chars(self) -> int:
        """Characters held back (raw and normalized): the streaming memory bound in use."""
        return self._stream.pending_chars()

    def feed(self, chunk: Chunk, out: list[int] | None = None) -> list[int]:
        """Add ``chunk`` to the text; return the ids that no later chunk can change.

        With ``out`` (a list), the ids are appended to it and ``out`` is returned: no list is
        made, copied and freed per chunk, which is what a caller collecting every id wants
        (``enc.feed(chunk, ids)`` rather than ``ids += enc.feed(chunk)``; without ``out`` each
        call's list is made at its final size, and the two forms are within a few percent of
        each other in ``python scripts/bench_serving.py --part b``). If the call raises, ``out``
        is left as it was.
        """
        return self._stream.feed(chunk, out)

    def finish(self, out: list[int] | None = None) -> list[int]:
        """The remaining ids (and the post-processor's suffix ids when ``add_special_tokens``).

        ``out`` as in ``feed``: the ids are appended to it and ``out`` is returned.
        """
        return self._stream.finish(out)

    def __copy__(self) -> StreamEncoder:
        """A branch of the stream: the copy and the original go on independently from the text
        fed so far (the tokenizer is shared). ``copy.deepcopy`` gives the same: the tokenizer
        does not change, so it is shared too. (``copy.copy`` shared the engine's state before,
        so that feeding either changed both.)"""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        stream = other._stream = self._stream.copy()
        if "feed" in self.__dict__:
            other.__dict__["feed"] = stream.feed
        return other

    PICKLE_ADVICE = "pickle the Tokenizer and feed the text again in the other process, or copy.copy() the encoder here"

    # The state the prompt cache keeps at a checkpoint (peek2.serving.incremental).
    def _snapshot(self) -> StreamState:
        return self._stream.snapshot()

    def _restore(self, state: StreamState) -> None:
        self._stream.restore(state)


_OWN_FEED = StreamEncoder.feed
"""``StreamEncoder.feed`` as the class defines it (see ``StreamEncoder.__init__``)."""


# ==== Decoding ====


class StreamDecoder(Branchable):
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

    # (It pickled as any object, with a copy of the tokenizer's bytes of every id: 1.4 MB for
    # Qwen3, where the docs say a serving object refuses; a bug hunt.)
    PICKLE_ADVICE = "pickle the Tokenizer and make tok.stream_decoder(prefill=ids) in the other process, or copy.copy() the decoder here"

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False, *, prefill: Iterable[int] = ()) -> None:
        self._tok = tokenizer
        self._skip = as_flag(skip_special_tokens, "skip_special_tokens")
        self._table = tokenizer._id_bytes
        # Special tokens left out when skipped: from id ``_first`` on, where ``_mask`` says so.
        self._first, self._mask = tokenizer._skip_mask() if self._skip else (len(self._table), b"")
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        if isinstance(prefill, (str, bytes)) or not isinstance(prefill, Iterable):
            raise TypeError(f"prefill must be a sequence of int, not {type(prefill).__name__}")
        self._utf8.decode(tokenizer.decode_bytes(prefill, self._skip))  # sets the state; the prompt's text is not returned

    def feed(self, token_ids: SupportsIndex | Iterable[SupportsIndex]) -> str:
        """The text completed by ``token_ids`` (one id or several); "" while a character is incomplete.

        Ids may be any integers with ``__index__`` (NumPy integers and arrays too), as in ``decode``.
        """
        if type(token_ids) is int:  # the usual call: one id
            return self._utf8.decode(self._lookup(token_ids))
        one = plain_int(token_ids)  # (a NumPy integer went the long way: 0.5-0.7x DecodeStream.step; a bug hunt)
        if type(one) is int:
            return self._utf8.decode(self._lookup(one))
        if isinstance(token_ids, (str, bytes)):
            raise TypeError(f"token_ids must be an int or a sequence of int, not {type(token_ids).__name__}")
        if isinstance(token_ids, Iterable) and getattr(token_ids, "ndim", 1) != 0:  # (a 0-d array is one id)
            return self._utf8.decode(self._tok.decode_bytes(token_ids, self._skip))
        try:
            token_id = operator.index(token_ids)  # type: ignore[arg-type]  # (a 0-d array)
        except TypeError:
            raise TypeError(
                f"token_ids must be an int or a sequence of int, not {type(token_ids).__name__} ({token_ids!r})"
            ) from None
        return self._utf8.decode(self._lookup(token_id))

    def finish(self) -> str:
        """The rest: U+FFFD for a UTF-8 sequence the ids left incomplete (as ``decode`` does).

        The decoder is then as new (no ``prefill``): unlike an encoder, whose ``finish`` ends it,
        it may decode the next response's ids."""
        return self._utf8.decode(b"", final=True)

    def __copy__(self) -> StreamDecoder:
        """A branch of the decoder: the copy and the original go on independently (the tokenizer
        is shared; ``copy.deepcopy`` gives the same). ``copy.copy`` shared the UTF-8 state before:
        a character the copy completed was taken from the original's."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        other._utf8.setstate(self._utf8.getstate())
        return other

    @property
    def pending_bytes(self) -> int:
        """Bytes of an incomplete character held back (at most 3)."""
        return len(self._utf8.getstate()[0])

    def _lookup(self, token_id: int) -> bytes:
        table = self._table
        data = table[token_id] if 0 <= token_id < len(table) else None
        if data is None:
            # decode raises its own error for the id, out of range or a gap in the ids (one message
            # here called a gap out of the range; a bug hunt)
            return self._tok.decode_bytes([token_id], self._skip)
        if token_id >= self._first and self._mask[token_id - self._first]:
            return b""
        return data
