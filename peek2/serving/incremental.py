"""Incremental encoding of growing prompts: an LRU of recent prompts and their checkpoints.

A chat server re-sends the whole conversation every turn: 90% of each prompt is the previous
prompt. ``PromptCache.encode(prompt)`` finds the cached prompt sharing the longest prefix with
it, resumes the streaming encoder (``peek2.serving.streaming``) from the last checkpoint inside that
shared prefix, and encodes only the rest. The ids are identical to ``Tokenizer.encode``: a
checkpoint is the encoder's whole state after a prefix of the text (the ids already final and
the pending text), and the streaming encoder's ids do not depend on where its input was cut.
So a checkpoint at character ``p`` is valid for any prompt that starts with the same ``p``
characters, whatever follows (an append, an edit in the tail, a divergent branch).

>>> cache = tok.prompt_cache(max_prompts=8)                         # doctest: +SKIP
>>> ids = cache.encode(system + history)                            # doctest: +SKIP
>>> ids = cache.encode(system + history + answer + question)        # re-encodes only the new turn
>>> ids == tok.encode(system + history + answer + question)         # doctest: +SKIP
True

Checkpoints are kept every ``CHECKPOINT_CHARS`` characters, and more densely near the end
(``TAIL_CHECKPOINTS``: 256 and 4096 characters before it), where the next turn's edits
usually start; each is a few references (the pending strings are at most a piece or so, and a
checkpoint is left out where more than ``CHECKPOINT_CHARS`` are pending).
No bookkeeping for the caller: the key is the text itself; the least recently used prompt is
dropped beyond ``max_prompts``, and a prompt that extends a cached one replaces it.

A server that knows what it appends (the new turn, not the whole conversation) can skip even
the prefix comparison and the copy of the ids that ``PromptCache.encode`` returns: a
``PromptSession`` takes the appended text and answers how many of the previous ids stay and
which ids follow them.

>>> session = tok.prompt_session()                                  # doctest: +SKIP
>>> keep, new = session.append(system + question)                   # doctest: +SKIP
>>> keep, new = session.append(answer + next_question)              # doctest: +SKIP
>>> del ids[keep:]; ids += new  # == tok.encode(system + question + answer + next_question)
"""

from __future__ import annotations

import os
import threading
import weakref
from bisect import bisect_right
from collections import OrderedDict
from typing import TYPE_CHECKING

from peek2.argument_checks import check_count
from peek2.bpe.merger import as_flag
from peek2.normalize.added_tokens import UnencodableText
from peek2.pretokenize.scanner import first_surrogate, surrogate_error
from peek2.serving.stream_engine import StreamState
from peek2.serving.streaming import Branchable, StreamEncoder, plan_of

if TYPE_CHECKING:
    from peek2.tokenizer import Tokenizer

CHECKPOINT_CHARS = 32_768
"""Characters between two checkpoints of a prompt (the most a divergence re-encodes from the last one)."""

TAIL_CHECKPOINTS = (256, 4096)
"""Extra checkpoints this many characters before the end of each prompt."""

_State = StreamState


class _Entry:
    __slots__ = ("text", "ids", "positions", "counts", "states")

    def __init__(self, text: str, ids: list[int] | None, positions: list[int], counts: list[int], states: list[_State]) -> None:
        self.text = text  # the prompt
        self.ids = ids  # the ids final before finish() (None once a longer prompt took them over)
        self.positions = positions  # checkpoint p: characters fed
        self.counts = counts  # ... ids final after them
        self.states = states  # ... the encoder's pending state


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (block compares, not a char loop)."""
    n = min(len(a), len(b))
    if (n == len(b) and a.startswith(b)) or (n == len(a) and b.startswith(a)):
        return n  # one is a prefix of the other: the usual case of a growing prompt
    low, block = 0, 256
    while low + block < n and a[low : low + block] == b[low : low + block]:
        low += block
        block *= 2
    high = min(n, low + block)  # the first difference is in [low, high)
    while high - low > 16:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    while low < high and a[low] == b[low]:
        low += 1
    return low


_CACHES: weakref.WeakSet[PromptCache] = weakref.WeakSet()


def _new_locks_in_child() -> None:
    """A fork copies a lock another thread holds, held: the child would wait for it forever."""
    for cache in list(_CACHES):
        cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_new_locks_in_child)


class PromptCache(Branchable):
    """Encodes prompts, re-tokenizing only from the last checkpoint a previous prompt shares.

    ``encode(text)`` returns exactly ``tok.encode(text, add_special_tokens,
    split_special_tokens=...)``. Safe to share between threads (the LRU is locked; encoding
    runs outside the lock).

    Raises:
        TypeError: ``encode`` of something that is not a str; ``max_prompts`` that is not an int.
        ValueError: ``max_prompts`` below 1.
    """

    def __init__(
        self, tokenizer: Tokenizer, max_prompts: int = 16, *, add_special_tokens: bool = True, split_special_tokens: bool = False
    ) -> None:
        check_count(max_prompts, "max_prompts", 1)
        plan_of(tokenizer)  # refuse a tokenizer the streaming encoder cannot handle, now
        self._tok = tokenizer
        self._add_special = as_flag(add_special_tokens, "add_special_tokens")
        self._split_special = as_flag(split_special_tokens, "split_special_tokens")
        self.max_prompts = max_prompts
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # id(entry) -> entry, oldest first
        self._lock = threading.Lock()
        _CACHES.add(self)
        self.reused_chars = 0
        """Characters not re-encoded thanks to the cache, over all calls (for monitoring)."""
        self.encoded_chars = 0
        """Characters actually fed to the encoder, over all calls."""

    def __len__(self) -> int:
        return len(self._entries)

    def __copy__(self) -> PromptCache:
        """A new cache with the same settings and prompts, which the two then keep apart (the
        tokenizer is shared; ``copy.deepcopy`` gives the same). ``copy.copy`` shared the prompts
        and their lock before, and ``copy.deepcopy`` failed on the lock."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._lock = threading.Lock()
        other._entries = OrderedDict()
        with self._lock:
            for entry in self._entries.values():
                if entry.ids is not None:  # (None: being taken over by an encode of this cache)
                    copied = _Entry(entry.text, list(entry.ids), list(entry.positions), list(entry.counts), list(entry.states))
                    other._entries[id(copied)] = copied
        _CACHES.add(other)
        return other

    PICKLE_ADVICE = "make one from the Tokenizer in the other process (tok.prompt_cache())"

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``; resumes from the cached prompt sharing the longest prefix with it.

        A text that cannot be encoded (not a str, a lone surrogate) is refused before the cache
        changes: the cached prompts stay as they were.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        if first_surrogate(text) >= 0:
            raise surrogate_error(text, ValueError("lone surrogate"))
        with self._lock:
            candidates = list(reversed(self._entries.values()))  # most recent first
        best: _Entry | None = None
        shared = 0
        for entry in candidates:
            if entry.text and text and entry.text[0] == text[0]:
                length = common_prefix(text, entry.text)
                if length > shared:
                    best, shared = entry, length
        encoder = StreamEncoder(self._tok, self._add_special, split_special_tokens=self._split_special)
        start, ids = 0, None
        if best is not None:
            k = bisect_right(best.positions, shared) - 1  # the last checkpoint inside the shared prefix
            with self._lock:  # another call may be taking over the same entry
                if best.ids is None:
                    pass  # taken over by a concurrent call: encode from the start
                elif shared == len(best.text) and self._entries.pop(id(best), None) is not None:
                    # The new prompt extends this one and replaces it: take over its ids in place
                    # (copying 100K ids costs more than encoding a 1K-token turn).
                    ids, best.ids = best.ids, None
                    del ids[best.counts[k] :]
                else:
                    ids = best.ids[: best.counts[k]]
        if best is not None and ids is not None:
            start = best.positions[k]
            positions, counts, states = best.positions[: k + 1], best.counts[: k + 1], best.states[: k + 1]
            encoder._restore(best.states[k])
        else:
            ids = []
            positions, counts, states = [0], [0], [encoder._snapshot()]
        self.reused_chars += start
        self.encoded_chars += len(text) - start
        for stop in _checkpoint_positions(start, len(text)):
            encoder.feed(text[start:stop], ids)
            start = stop
            if encoder.pending_chars > CHECKPOINT_CHARS:
                # Inside a long run the stream holds whole (a whitespace run after its last
                # newline, marks NFC may reorder): a checkpoint would keep its own copy of the run
                # so far, which the next feed copies again (4M spaces kept 249 MB; a bug hunt),
                # and resuming there would encode that run again anyway.
                continue
            positions.append(stop)
            counts.append(len(ids))
            states.append(encoder._snapshot())
        result = ids + encoder.finish()
        entry = _Entry(text, ids, positions, counts, states)
        with self._lock:
            self._entries[id(entry)] = entry
            while len(self._entries) > self.max_prompts:
                self._entries.popitem(last=False)
        return result


def _checkpoint_positions(start: int, end: int) -> list[int]:
    """Where to stop feeding between ``start`` and ``end``: every CHECKPOINT_CHARS, and near the end."""
    stops = set(range(start - start % CHECKPOINT_CHARS + CHECKPOINT_CHARS, end, CHECKPOINT_CHARS))
    stops.update(end - back for back in TAIL_CHECKPOINTS if end - back > start)
    if end > start:
        stops.add(end)  # (a repeated prompt already has its end checkpoint: no duplicates)
    return sorted(stops)


class PromptSession(Branchable):
    """One growing prompt, encoded append by append: each ``append`` encodes only its text and the
    unfinished piece before it.

    ``append(text)`` returns ``(keep, new)``: the ids of everything appended so far are the first
    ``keep`` ids of the previous answer followed by ``new``. The ids already final stay (the
    streaming encoder's guarantee); ``new`` re-encodes only the pending tail (a piece, or a
    special-token or NFC run still open) and the appended text. ``ids`` is the whole list.

    >>> tok = peek2.Tokenizer.from_file("llama3.1/tokenizer.json")       # doctest: +SKIP
    >>> session = tok.prompt_session(add_special_tokens=False)          # doctest: +SKIP
    >>> session.append("Hello wor")                                     # doctest: +SKIP
    (0, [9906, 4191])
    >>> session.append("ld")            # " wor" is not final: it becomes " world"  # doctest: +SKIP
    (1, [1917])

    Not thread-safe (one session per conversation). Raises TypeError for an ``append`` of
    something that is not a str.
    """

    def __init__(self, tokenizer: Tokenizer, *, add_special_tokens: bool = True, split_special_tokens: bool = False) -> None:
        plan_of(tokenizer)  # refuse a tokenizer the streaming encoder cannot handle, now
        self._encoder = StreamEncoder(tokenizer, add_special_tokens, split_special_tokens=split_special_tokens)
        self._final: list[int] = []  # the ids no append can change
        self._tail: list[int] = self._finish_copy()  # finish() of the text so far (at first, the empty prompt's ids)
        self.text_chars = 0
        """Characters appended so far."""

    def append(self, text: str) -> tuple[int, list[int]]:
        """Append ``text``; returns ``(keep, new)``: the ids now are ``previous[:keep] + new``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        encoder, final = self._encoder, self._final
        keep = len(final)
        stream = encoder._stream
        # The text so far may be one tokenizers cannot encode, though each chunk was fine: then
        # the session goes back to before this append (as for a bad chunk, docs/serving.md).
        state = stream.snapshot() if stream.plan.lstrip and stream.plan.rstrip_ids else None
        try:
            encoder.feed(text, final)
            tail = self._finish_copy()
        except UnencodableText:
            if state is not None:
                stream.restore(state)
                del final[keep:]
            raise
        before = self._tail
        self._tail = tail
        self.text_chars += len(text)
        new = final[keep:]
        if not new:
            # Nothing became final, so the pending text starts where it did, and the first ids of
            # both finishes that the engine knows to be the same are kept: a long piece held
            # whole answered all its ids at every append (copies quadratic in the appends).
            same = min(encoder._stream.finish_stable, len(before), len(tail))
            if same:
                return keep + same, tail[same:]
        new += tail
        return keep, new

    def __copy__(self) -> PromptSession:
        """A branch of the session: the copy and the original are appended to independently
        (the tokenizer is shared; ``copy.deepcopy`` gives the same). ``copy.copy`` shared the
        stream and the ids before: an append to either changed both."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._encoder = self._encoder.__copy__()
        other._final = list(self._final)
        other._tail = list(self._tail)
        return other

    PICKLE_ADVICE = "pickle the Tokenizer and append the text again in the other process, or copy.copy() the session here"

    def _finish_copy(self) -> list[int]:
        """The ids ``finish`` gives now; the session goes on from before the finish."""
        return self._encoder._stream.finish_copy()

    @property
    def ids(self) -> list[int]:
        """The ids of everything appended so far (a new list; before any append, the empty prompt's)."""
        return self._final + self._tail
