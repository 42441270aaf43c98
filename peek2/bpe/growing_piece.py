"""Where the first ids of a piece that is still growing are final, whatever the piece goes on with.

A stream (``peek2.serving.streaming``) or a prompt session fed one long run (spaces, ``=``, CJK letters
without punctuation, combining marks) gets one piece that never ends, and its ids used to wait for
the end: held whole in memory, and re-encoded by every append of a session (issue 23, items 2 and
4). This module finds a prefix of such a piece whose ids no continuation can change, so that the
stream can send them and forget that part of the piece.

Byte-pair merging (lowest rank first, leftmost on ties: HuggingFace's and tiktoken's rule) has
three properties that decide it exactly (the "valid encoding" corollaries of GitHub's ``bpe``
crate, which hold for HuggingFace's merge ranks too: the proofs only use that merges on either side
of a boundary nothing crosses happen in the same order as alone):
1. a run of consecutive tokens of a text's encoding is the encoding of its bytes;
2. if ``A`` ends with token ``t``, ``B`` starts with ``t``, and both are encodings, then ``A`` and
   ``B`` glued on ``t`` is an encoding; so an encoding ``e_1..e_j`` followed by the encoding
   ``u_1..u_m`` of the next bytes is the encoding of the whole when ``merge(e_j + u_1) = [e_j, u_1]``;
3. (from 1) the encoding of a text, cut at a boundary of its tokens, ends with the encoding of each
   longer-than-zero prefix that ends at one of its boundaries.

Let ``w`` be the piece so far (it surely goes on at least that far) and ``P`` the whole piece, which
starts with ``w``. Walking ``P``'s tokens back from its end, the first boundary at or before
``len(w)`` is a position ``k`` where ``w[k:]`` is empty or a proper prefix of a token (the token
over ``len(w)`` starts there): the landing set ``K``, at most the last ``max_bytes`` positions. By 3, ``P``'s tokens before ``k`` are the
encoding of ``w[:k]``. So a boundary ``s`` of ``merge(w)`` (tokens ``e_1..e_j`` before it) is
final when, for every ``k`` in ``K``, the encoding of ``w[:k]`` has a boundary at ``s``; by 2 it
does when ``merge(e_j + u_1) = [e_j, u_1]`` for ``u_1``, the first token of ``merge(w[s:k])``.
That is an exact test, run on a few hundred bytes.

The same test bounds the merge of one enormous piece (``LongPieces``: a megabyte of spaces, of
``=``, of DNA letters): the piece is merged a block of ``LONG_BLOCK_BYTES`` at a time, each block's
final prefix kept and the merge going on from its end, so the merge's memory (about 48 bytes a
byte in one heap) is that of a block, not of the piece. The engine takes each block's ids as it
comes (``count`` keeps none), and ``final_prefix`` on a piece of more than ``LONG_PIECE_BYTES``
(a stream or a session fed one enormous chunk) goes through the same blocks before it searches the
last one.

Performance notes: compiled (a prompt session appending 100 characters at a time to one run,
Llama-3.1, CPU medians of 5: 66,000 "=" 32.5 -> 24.0 ms, newlines 21.2 -> 16.6, "中" 13.0 -> 10.0,
100,000 spaces 65.6 -> 49.9; ``tokenizers`` encodes the whole text once in 20, 20, 41 and 33 ms).
The stream runs it only on a piece longer than ``StreamPlan.interior_min``
characters, and again when the piece has grown by as much (or doubled, after a failed test): one
merge of the piece, one merge of ``w[s:k]`` for each landing position (64 for a run of "=" with
Llama-3, whose longest "=" token is 64 bytes; a handful for CJK), and a cached pair test.
"""

from __future__ import annotations

from typing import Callable, Final, Iterator

from peek2.bpe.merger import BLOCKS_KEPT_ROOM, LONG_PIECE_BYTES, BytePairEncoder
from peek2.bpe.token_prefixes import TokenPrefixes

SPLIT_TRIES: Final = 4  # boundaries tried, from the right, before giving up until the piece doubles
ACCEPT_TRIES: Final = 64  # boundaries the caller's ``accept`` may refuse before the search gives up
LONG_BLOCK_BYTES: Final = BLOCKS_KEPT_ROOM - 8  # LongPieces: the bytes merged at a time (in the kept scratch)
RETRY_GROWTH: Final = 8


def retry_after(length: int, step: int) -> int:
    """The length at which a memo whose ``final_prefix`` found nothing at ``length`` tries again:
    ``length`` plus an eighth of it, or ``step`` if more. (At twice the length, a prompt session
    merged up to twice the failed length at every append until then: Qwen3, "\\n" then spaces
    appended one at a time, a first try at 2,048 characters failed and the appends up to 4,096
    took 100-170 us each, where the memo answers in 6.) The tries stay linear in all: a failed
    one costs about what an append without the memo costs, once per ``length / 8`` characters."""
    return length + max(step, length // RETRY_GROWTH)


class GrowingPiece:
    """What ``final_prefix`` needs of a tokenizer (built once, at its first long piece)."""

    def __init__(
        self, engine: BytePairEncoder, vocab: dict[bytes, int], id_bytes: tuple[bytes | None, ...], starts: TokenPrefixes | None = None
    ) -> None:
        self.engine: Final = engine
        self.id_bytes: Final = id_bytes
        self.vocab: Final = vocab
        # To ask whether some token starts with given bytes (``starts``: made already).
        self.starts: Final[TokenPrefixes] = TokenPrefixes(vocab, id_bytes) if starts is None else starts
        self.max_bytes: Final[int] = max(self.starts.longest, 1)
        self.pairs: Final[dict[tuple[int, int], bool]] = {}  # (left, right) -> merge(left + right) == [left, right]
        self.firsts: Final[dict[bytes, int]] = {}  # bytes -> the first token of their merge
        self.ends: TokenPrefixes | None = None  # ... ends with given bytes (made at first need)

    def final_prefix(self, data: bytes, first: int, accept: Callable[[int], bool] | None = None) -> tuple[int, list[int]]:
        """``(s, ids)``: a boundary ``s > first`` of ``data``'s tokens, at the start of a UTF-8
        character, that no continuation of ``data`` moves, and the ids of ``data[:s]``; ``(0, [])``
        if none is found.

        ``data`` of more than LONG_PIECE_BYTES bytes (a stream or a session fed one enormous
        chunk) is cut block by block as ``LongPieces`` cuts it, and its last block searched:
        merged whole, it took ~48 bytes of memory a byte (4 MB of "=": +190 MB). A final boundary
        of a block is one of ``data`` (whatever continues the block), and one of the rest after
        it is one of ``data``, so the cut found is final too.
        """
        if len(data) <= LONG_PIECE_BYTES:
            return self._final_prefix_whole(data, first, accept)
        ids: list[int] = []
        at = 0
        while True:
            stop, head = self.next_block(data, at)
            if stop == at:
                break
            ids += head
            at = stop
        cut, rest = self._final_prefix_whole(data[at:], max(0, first - at), None if accept is None else lambda s: accept(at + s))
        if cut:
            ids += rest
            return at + cut, ids
        if at > first and (accept is None or accept(at)):
            return at, ids
        return 0, []

    def next_block(self, data: bytes, at: int) -> tuple[int, list[int]]:
        """``(stop, ids)``: a final boundary ``stop`` of ``data`` after ``at`` found in the next
        ``LONG_BLOCK_BYTES`` (doubled while a block has none), and the ids of ``data[at:stop]``;
        ``(at, [])`` when what is left is not longer than the block."""
        size = LONG_BLOCK_BYTES
        while len(data) - at > size:
            stop = at + size
            while stop > at + 1 and 0x80 <= data[stop] < 0xC0:
                stop -= 1  # (at a character's start: a block of whole characters merges as text)
            cut, head = self._final_prefix_whole(data[at:stop], 0)
            if cut:
                return at + cut, head
            size *= 2  # no final boundary in this block: a longer one
        return at, []

    def _final_prefix_whole(self, data: bytes, first: int, accept: Callable[[int], bool] | None = None) -> tuple[int, list[int]]:
        """``final_prefix`` with ``data`` merged in one heap. ``accept``: the boundaries the caller can
        use (a stream in a piece of several categories can keep the rest only behind some of them:
        o200k's capitals and marks in turn are cut after a mark, never after a capital); the others
        are passed over, at most ``ACCEPT_TRIES`` of them."""
        # The smallest position of the landing set (not a contiguous range: "-=" may start no token
        # where "=-=-" does).
        landing = self._landing(data)
        if landing <= first:
            return 0, []
        ids = self.engine.merge_whole(data)
        id_bytes = self.id_bytes
        tries = 0
        passed = 0
        j = len(ids) - 1
        s = len(data)  # the end of ids[j]: boundaries are found from the end back (a block of
        # LongPieces holds 30K tokens of "<|", and summing them all cost 5x its merge)
        while j > 0 and tries < SPLIT_TRIES:
            s -= len(id_bytes[ids[j]] or b"")  # the boundary after ids[j - 1]
            j -= 1
            if s > landing or s <= first or 0x80 <= data[s] < 0xC0:
                continue
            if accept is not None and not accept(s):
                passed += 1
                if passed > ACCEPT_TRIES:
                    break
                continue
            tries += 1
            if self._holds(data, s, ids[j], landing):
                return s, ids[: j + 1]
        return 0, []

    def stable_start(self, data: bytes) -> int:
        """A boundary ``j > 0`` of ``data``'s tokens, at the start of a UTF-8 character, that stays a
        boundary of the encoding of ``context + data + more`` whatever the context and whatever
        follows; -1 if none is found in ``data``.

        The mirror of ``final_prefix``: in the encoding of ``context + data + more``, the token over
        the start of ``data`` ends at a position ``k`` where ``data[:k]`` is a proper suffix of a
        token (or at 0); by property 1 the tokens after it are the encoding of ``data[k:] + more``.
        So ``j`` is stable when, for every such ``k``, it is a boundary of ``data[k:]``'s tokens that
        no continuation moves (``_holds``).
        """
        starts = [0] + [k for k in range(1, min(len(data), self.max_bytes)) if self._ends_token(data[:k])]
        encodings: list[tuple[bytes, dict[int, int], int]] = []  # per start: its bytes, boundary -> token before, landing
        for k in starts:
            tail = data[k:]
            before: dict[int, int] = {}
            at = 0
            for token_id in self.engine.merge(tail):
                at += len(self.id_bytes[token_id] or b"")
                before[at] = token_id
            encodings.append((tail, before, self._landing(tail)))
        tries = 0
        for j in sorted(encodings[0][1]):
            if j <= starts[-1] or j >= len(data) or 0x80 <= data[j] < 0xC0:
                continue
            tries += 1
            if tries > 4 * SPLIT_TRIES:
                break
            if all(
                (j - k) in before and (j - k) <= landing and self._holds(tail, j - k, before[j - k], landing)
                for k, (tail, before, landing) in zip(starts, encodings)
            ):
                return j
        return -1

    def _landing(self, data: bytes) -> int:
        """The smallest position where the last token of a longer text starting with ``data`` may start."""
        n = len(data)
        for k in range(max(0, n - self.max_bytes), n):
            if self._starts_token(data[k:]):
                return k
        return n

    def _ends_token(self, data: bytes) -> bool:
        """Whether ``data`` is a proper suffix of some token."""
        ends = self.ends
        if ends is None:
            ends = self.ends = TokenPrefixes(self.vocab, self.id_bytes, reverse=True)
        return ends.is_proper_prefix(data[::-1])

    def _holds(self, data: bytes, s: int, last: int, landing: int) -> bool:
        """For every landing position ``k``, the encoding of ``data[:k]`` has a boundary at ``s``."""
        for k in range(max(landing, s + 1), len(data) + 1):
            if k < len(data) and not self._starts_token(data[k:]):
                continue  # not a landing position
            if not self._compatible(last, self._first_token(data[s:k])):
                return False
        return True

    def _first_token(self, data: bytes) -> int:
        """The first token of ``merge(data)``, remembered: a run of one character asks for the
        same bytes at every cut (the 100+ landing positions of a run of spaces)."""
        first = self.firsts.get(data)
        if first is None:
            first = self.engine.merge(data)[0]
            if len(self.firsts) > 1 << 14:
                self.firsts.clear()
            self.firsts[data] = first
        return first

    def _compatible(self, left: int, right: int) -> bool:
        key = (left, right)
        known = self.pairs.get(key)
        if known is None:
            known = self.engine.merge((self.id_bytes[left] or b"") + (self.id_bytes[right] or b"")) == [left, right]
            if len(self.pairs) > 1 << 16:
                self.pairs.clear()
            self.pairs[key] = known
        return known

    def _starts_token(self, data: bytes) -> bool:
        """Whether ``data`` is a proper prefix of some token."""
        return self.starts.is_proper_prefix(data)


class LongPieces:
    """``BytePairEncoder.long_pieces``: the ids of a piece of more than ``LONG_PIECE_BYTES`` bytes,
    merged ``LONG_BLOCK_BYTES`` at a time (the module's notes).

    Performance notes (``python scripts/bench_long_inputs.py``; Llama-3.1, 2 MB pieces, the merge
    alone, one run): "=" 1.21 -> 0.75 s, spaces 1.30 -> 0.93 s, random "ACGT" 1.36 -> 0.76 s,
    random lowercase 0.78 -> 0.47 s (a 3 MB heap stays in the caches; a whole piece's did not),
    random CJK ideographs 0.23 -> 0.25 s. Later (a bug hunt found a step where pieces went from
    the merger's own blocks to these: 131,073 "é" cost 2.75x 131,072, 150,000 "中" 5.3x 131,072):
    a block of whole characters merges as text (``merge_whole``: a character whose token stands
    for its bytes enters as that token), its end moved back to a character's start, and blocks
    of 32 KB, whose symbols fit the merger's kept scratch (64 KB ones borrowed 2 MB of arrays
    each). Llama-3.1, ``encode``, CPU medians of 5: 131,073 "é" 9.6 -> 5.1 ms (131,072: 3.3),
    262,144 "é" 20.0 -> 9.1, 150,000 "中" 19.6 -> 6.6, random CJK with Qwen2 (59,400 characters,
    more than 131,072 symbols) 24.2 -> 11.6; 320,000 "=" 19.9 -> 17.3 ms, 1M spaces 58.5 -> 55.4. Where a block has no final boundary (none was seen in
    these), the block doubles: at worst the piece is merged about twice, as before in memory.
    """

    def __init__(self, engine: BytePairEncoder, vocab: dict[bytes, int], id_bytes: tuple[bytes | None, ...]) -> None:
        self.engine: Final = engine
        self.vocab: Final = vocab
        self.id_bytes: Final = id_bytes
        self.growing: GrowingPiece | None = None  # made at the first long piece (grouping the tokens: 3-5 ms)

    def growing_piece(self) -> GrowingPiece:
        growing = self.growing
        if growing is None:
            growing = self.growing = GrowingPiece(self.engine, self.vocab, self.id_bytes)
        return growing

    def build_in_steps(self) -> Iterator[None]:
        """Makes ``growing_piece()`` for ``peek2.serving.aio``, yielding to the event loop after its
        one step of a few ms (the tokens grouped by their first two bytes, ``TokenPrefixes``). It
        used to sort the vocabulary, 30-45 ms for Llama-3's 128K tokens, in steps of 32K tokens:
        done inside the slice of a first ``async_encode`` whose text held a long piece, it held
        the loop (a bug hunt)."""
        if self.growing is not None:
            return
        starts = TokenPrefixes(self.vocab, self.id_bytes)
        yield
        self._made_from(starts)

    def _made_from(self, starts: TokenPrefixes) -> None:
        """Makes ``growing_piece()`` from ``starts``, unless another caller made it meanwhile (two
        first ``async_encode`` calls at once). A method of its own: in ``build_in_steps``, after
        its ``is not None`` test, mypyc took ``self.growing`` for None across the yield, and the
        second caller failed its compiled type check ("None object expected"; a bug hunt)."""
        if self.growing is None:
            self.growing = GrowingPiece(self.engine, self.vocab, self.id_bytes, starts)

    def block(self, data: bytes, at: int) -> tuple[int, list[int]]:
        """``BytePairEncoder.long_pieces``: ``(stop, ids)``, the ids of ``data[at:stop]``, a
        block that no later byte changes; ``stop == len(data)`` for the last one, merged whole.

        A block at a time, so that ``count`` keeps none of them and ``encode`` copies each into
        its buffer of ids (gathered in a list here first, they cost ~47 bytes an id at peak).
        """
        stop, ids = self.growing_piece().next_block(data, at)
        if stop > at:
            return stop, ids
        return len(data), self.engine.merge_whole(data[at:] if at else data)

    def __call__(self, data: bytes) -> list[int]:
        """The ids of the piece ``data``, merged a block at a time."""
        ids: list[int] = []
        at = 0
        while at < len(data):
            at, head = self.block(data, at)
            ids += head
        return ids
