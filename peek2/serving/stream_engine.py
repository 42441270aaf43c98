"""The streaming encoder's engine: what ``peek2.serving.streaming.StreamEncoder`` runs, compiled.

``peek2.serving.streaming`` holds the public classes and the rules (when a piece is final, the memory
bound); this module applies them. Compiled with mypyc because a chunk of 1 KB encodes in about
25 us and the interpreted bookkeeping around it (UTF-8 decoding, the boundary search, four
method calls) cost 2-3 us of it.

Performance notes (Llama-3.1; each figure is the time of streaming 300K characters over that of
one ``encode`` of them in the same process, best of 7, alternating processes of the two builds):
- Interpreted, UTF-8 chunks of 1 KB took 1.16x (XNLI) and 1.19x (Chinese) the one-shot time;
  the engine alone, called on the same cuts, 1.00-1.03x: the rest was the Python around it.
  Compiled: 1.09-1.11x and 1.13x (5% less time in every row, 2% at 64 KB).
- Bytes are decoded with ``codecs.utf_8_decode(data, "strict", False)`` and the incomplete
  tail kept here: the same decoder and errors as ``codecs``' incremental decoder, without its
  two interpreted calls a chunk.
- What remains, by sampling (perf, cpu-clock): appending each id to the caller's growing list
  (``PyList_Append`` and the list's reallocations) where one-shot ``encode`` fills a list made
  at its final size, and decoding UTF-8 chunk by chunk. Growing the list once per call and
  filling it (``out += [None] * count``) moved that time into ``list_extend``/``list_dealloc``:
  no difference in the ratios above, not kept; nor did extending ``out`` from a list made at its
  final size (``encode_list_prefix``), in three alternating processes of each build (1 MB of
  XNLI and Chinese, 64 KB and 1 KB chunks).
- When ``feed``/``finish`` make the list themselves (no ``out``: ``ids += enc.feed(chunk)``), it
  is made at its final size by ``encode_list_prefix``, as ``encode`` makes its list, instead of
  growing id by id; and the final prefix of the pending text is encoded in place (a range, not a
  slice of it). Paired with the build before (300K characters, medians of 9, three alternating
  processes of each build, on a machine noisier than usual): ``ids += enc.feed(chunk)`` in 1 KB
  str chunks of Chinese 0.81-0.83x -> 0.86-0.92x the one-shot speed; the other rows moved within
  the noise (XNLI 1 KB 0.83-0.87x -> 0.80-0.93x).
- A chunk's fixed cost, not its encoding, is what separates 1 KB UTF-8 chunks of Chinese (341
  characters) from the one-shot encode. Four generic operations per chunk were removed: an
  ``isinstance`` with a tuple (a builtins lookup for ``memoryview`` and a new tuple), a tuple
  iterated and the builtin ``max`` called in the surrogate check, ``text[-1]`` (a new str, then
  hashed) in the added-token check, and the module-dict lookup of ``utf_8_decode`` (now a
  ``Final``, a C static). ``feed`` of a 3-character chunk: str 280 -> 169 ns, bytes 510 -> 368
  ns. In ``scripts/bench_serving.py --part b --runs 15`` (two alternating processes of each
  build): Chinese 1 KB bytes 0.88-0.89x -> 0.90-0.91x (``out``), 0.84-0.86x -> 0.87-0.88x
  (``ids +=``); the other rows within the noise.
- Left: of what remains between 1 KB UTF-8 chunks of Chinese and the one-shot (about 12%), 4
  points are CPython decoding 1,000 chunks instead of one text (each call allocates a Latin-1
  string, widens it to UCS-2 at the first CJK character, then shrinks it: 1.18 ms against 0.75
  ms per MB), 3 are the ids appended to a growing list instead of one made at its size, and
  the engine itself run on the same cuts (no bookkeeping) is 3% slower than on the whole text.
- Rule 3 (a growing piece, ``_interior_cut``): its probes run once per run (``run_kind``
  remembers the run they cleared), and ``peek2.bpe.growing_piece`` remembers the first token of
  the bytes it merges, which repeat from cut to cut in a run of one character. Streaming 1M
  characters in 1 KB chunks (Llama-3.1, CPU time, best of 3): spaces 715 -> 269 ms with that
  memo (one-shot encode 292 ms, tokenizers 559 ms), "=" 233 ms (281, 506), CJK 307 ms (595,
  1501), marks 166 ms (205, 1115). A prompt session appending 1,000 spaces 152 times: 2,472 ->
  59 ms. Streaming "=" in 1 MB chunks: peak RSS 176 MB at 4, 16 and 50 MB (924 MB at 16 MB
  before; 139 MB is the loaded tokenizer).
- ``finish`` of a pending text that ends in a long run of one character (``_finish_run``): a prompt
  session appending 1,000 spaces 152 times after a newline, Llama-3.1, CPU time, best of 3: 2,528
  -> 80 ms (38 appends: 153 -> 20 ms). Whitespace runs of several characters (" \\n", "\\xa0 ", "\\n"
  then spaces and tabs) the same way: 80K characters in 1K appends 0.28-0.64 -> 0.02-0.03 s.
- ``finish`` of a long NFC run of marks of several classes (``peek2.serving.marks_run``) and the NFC
  walk's memo kept in the snapshot (``restore`` used to drop it, and the next ``feed`` walked the
  held run back from its end, character by character): Qwen3, ``"e" + "\\u0301\\u0323" * 160000``
  appended 1K at a time, 2.67 s with the first alone, 0.56 s with both.
- A held raw run is searched for added tokens only past what earlier feeds searched (``searched``):
  the same run fed one mark at a time, 320K marks, 3.3 -> 0.66 s (80K: 0.16 s; tokenizers' one
  encode of the 320K: 0.29 s). A token that crosses two classes is looked for in one bytes object
  of all tokens (memmem), not token by token (about 50 ms a pair before).
- Whitespace after an ``rstrip`` token was held with the token, and with any ``lstrip`` token in the
  file whitespace at the end was walked back from its end at every feed: ``"<x>"`` + 20,000 spaces
  fed a character at a time took about 10 s (4x per doubling). The token is now sent and the rest
  matched ``absorbed`` (see _raw_limit), and the walk is remembered (``ws_memo``, kept in the
  snapshot): 0.05-0.06 s for 20,000 (interpreted; 0.02 s without such a token).
- ``finish`` of a pending text whose last piece is long and of several categories (``_finish_piece``:
  o200k's letters and marks in turn, Thai without spaces, DeepSeek-V3's Latin of two kinds): a
  prompt session appending 100 characters at a time, 100K characters, CPU time, a busy machine:
  GPT-4o ``"a\\u0301"`` 3.44 -> 0.59 s, DeepSeek-V3 ``"\\u00e9e"`` 4.61 -> 0.42 s (the merge of the
  whole piece at every finish was 60% of the time, in ``_heap_pop``/``_merge_heap``/``MergeTable.get``;
  the scanner over the pending text 2.5%).
- Rule 3 in a piece of several categories (``_loop_cut``, the rest behind the scanner's
  ``resume_context``): a prompt session appending GPT-4o's ``"a\\u0301"`` 300 characters at a
  time, 400K characters, 1.48 s (the scanner reading the piece from its start at every finish:
  a third of the time; the finish's list of its ids: a sixth) -> 0.18 s; 1.6M in 1K appends
  0.56 s (tokenizers' one encode: 1.46 s). CPU time, a busy machine.
- Rule 3 on o200k's runs of "/" and newlines mixed (``SLASH_NEWLINE_RUN``; its probes run at every
  cut): a prompt session appending ``"/\\n"``, ``"\\n/"``, ``"//\\n"``, ``"/\\r\\n"`` or ``"\\n\\n/"`` in 1K
  parts after "!", 80K characters: 0.51-0.72 -> 0.037-0.052 s, CPU time (20K: 0.010-0.011 s;
  tokenizers' one encode of the 80K: 0.032-0.041 s).
- Rule 3's scans of the pending text (``_loop_cut``, ``_run_cut``): ``_same_piece`` takes the piece
  ends its caller found before each probe instead of scanning the pending text again, and the
  contraction letters among the probes are left out where no apostrophe ends the text (they
  end a piece where a letter of their category does). ``async_encode(" \t" * 80000)``, medians
  of 5 in one process beside tokenizers' ``async_encode``: DeepSeek-V3 0.80x -> 1.25x, Llama-3.1
  0.98x -> 1.44x (66 scans of the pending text per cut -> 19; a busy machine).
- A stream fed a character at a time (``scripts/bench_hunt_cases.py --only stream``, CPU medians of
  5 beside tokenizers' one ``encode`` of the whole): rule 1 looks only at the pairs of characters
  its last search did not see (``_piece_cut``: that search's window, compared as a slice: as
  ``str.startswith(s, start)`` the argument parsing cost more than it saved), ``final_boundary``
  has no 3-argument ``max()`` (a builtins call: mypyc compiles only two), and ``StreamEncoder``
  puts this class's ``feed`` in its instance dict (unless a subclass or a patch of the class
  made before the encoder has its own). GPT-4o, 100K spaces 0.49x -> 0.88x, 100K "a" 0.53x ->
  0.97x; DeepSeek-V3's spaces 0.49x -> 0.85x; English 2.9x before and after. What is left in a
  run is one merge of it by rule 3 (an encode's worth) and about 300 ns a call. Later the same
  day the runs measured 0.71-0.86x: the merger's block loop had moved 32 bytes in the build,
  its code the same, and its merges of a run became 10-25% slower; with functions and loops
  aligned (setup.py) 0.82-0.95x again. The next stop's tiers of block minima
  (``peek2.bpe.merger``'s notes: rule 3 merges the run in pieces of about 2,040 characters, where
  the blocks' scan was a quarter of the time): 1.10-1.29x.
- A prompt session appended a character at a time on a long run: each answer merged the pending
  rest of the piece rule 3 had cut, up to 2,048 characters with an NFC normalizer (which kept
  rule 3's first threshold for sessions, so that a run of marks after a cut would not miss
  ``_finish_marks``: that path now takes the cut's rest, ``MarksRun.ids``' ``cont_from``) and a few
  hundred otherwise. A sample (py-spy, native frames): the merge of that rest was 80% of the
  session. The same rests come back in a run of one character, so ``StreamPlan.merged`` remembers
  their merges. 20,000 spaces, CPU time of the session: Qwen3 1.10 -> 0.36 s (the threshold) ->
  0.071 s (the memo), Llama-3.1 0.35 -> 0.059 s; tokenizers' one encode of the whole: 0.006 s.
- Rule 3's probes on a long run read it shortened to its first and last ``RUN_SAMPLE`` scalars
  (``_short_run``): each probe read the whole pending text (callgrind: 19 scans of it for one
  feed). A stream fed ``"<|" * 2000`` or ``"\x00" * 4000`` in one chunk, cl100k, CPU medians of 9
  beside tiktoken's one ``encode``: 0.26x -> 0.48-0.51x; 4,000 spaces 1.34x -> 2.02x; o200k's
  prompt session, prompt cache and ``async_encode`` of ``"<|" * 2000``: 0.22-0.31x -> 0.34-0.44x.
  What is left: the merge (an encode's worth), two more scans (rules 1 and 3), and the ids
  appended one by one. Fed 16 characters at a time, such text costs 2.1 us a feed (English 0.7
  us): the added-token search at each feed's end (``"<|"`` starts ``"<|endoftext|>"``).
"""

from __future__ import annotations

import bisect
import re
import weakref
from codecs import utf_8_decode
from typing import TYPE_CHECKING, Final

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs
from mypy_extensions import i64

from peek2.bpe.merger import BytePairEncoder
from peek2.bpe.growing_piece import GrowingPiece, LongPieces, retry_after
from peek2.serving.marks_run import MarksRun
from peek2.pretokenize.scanner import (
    RULE_SLASH_AFTER_PUNCT,
    category,
    first_of_each_category,
    final_boundary,
    first_surrogate,
    piece_end,
    resume_context,
    surrogate_error,
)
from peek2.normalize.added_tokens import WHITESPACE, AddedTokenMatcher, UnencodableText
from peek2.normalize.nfc_late import (
    COMPOSITES_BY_SECOND,
    MARK_CLASS,
    STREAM_STICKY,
    STREAM_STICKY_SECONDS,
    STREAM_STICKY_SECONDS_AFTER_MARKS,
)
from peek2.normalize.added_tokens import is_word_char as _is_word_char
from peek2.normalize.nfc import inert_scalars

if TYPE_CHECKING:  # (the Tokenizer reaches this module, never the other way round at import)
    from peek2.tokenizer import Tokenizer

_UTF8_DECODE: Final = utf_8_decode  # (a Final is a C static: no lookup in the module's dict per chunk)

LOCAL_WINDOW: Final = 64
# The run_kind of a run of "/", "\r" and "\n" mixed, which o200k's punctuation ends with
# ([\r\n/]*): not a category (see _interior_cut).
SLASH_NEWLINE_RUN: Final = -2
LOOP_RUN: Final = -3  # the run_kind after a cut in a piece of several categories (_loop_cut)
"""Characters searched backwards from the end of the pending text for a local boundary (rule 1)."""

CONTRACTION_CHARS: Final = 3
"""The longest contraction ("'re", "'ve", "'ll"): rule 2 sees this many characters after a piece."""
RESCAN_MIN: Final = 1024
"""Pending characters before the scanner (rule 2) is asked for a boundary; then each doubling."""

_NO_MEMO: Final = (-1, -1, -1)

RUN_MERGE_MIN: Final = 32
RUN_MERGES_MAX: Final = 4096
"""``StreamPlan.merged`` remembers the merges of runs of one character of at least ``RUN_MERGE_MIN``
characters (shorter ones cost less than a lookup), up to ``RUN_MERGES_MAX`` of them (then starts
again: a few hundred KB at most for a tokenizer, shared by its streams)."""

StreamState = tuple[str, str, bool, int, bool, int, int, bool, tuple[int, int, int], int, int, tuple[int, int]]
"""What ``snapshot`` keeps: raw, text, started, rescan_at, cont, interior_at, run_kind, need_space,
the NFC walk's memo over that raw text, the head of a piece kept for the scanner (a session restores after every append: walking a held
run back from its end again each time was quadratic), ``absorbed``, and the lstrip walk's memo (``ws_memo``, kept for the same reason)."""

INTERIOR_MIN_TOKENS: Final = 16
INTERIOR_MIN_TOKENS_FINISHED_AGAIN: Final = 2
"""Rule 3's threshold (below) in a stream finished again after each restore (a prompt session's,
a prompt cache's): each finish merges the pending text, so it is kept short there. (At 16, a
session appended 4 characters at a time on a run of CJK letters or spaces merged about 1,000
characters an append, 60-100 us; at 2, 18 us. A stream finished once keeps 16: at 2, a run fed a
character at a time tried the cut 8x as often, 1.26x -> 0.46x one encode by tokenizers.)"""
MEMO_STEP_TOKENS: Final = 2
"""A finish's memo (``_finish_run``, ``_finish_piece``) grows once the rest of its piece holds this
many of the longest token's bytes (in characters): the rest is merged at every finish, and at
``INTERIOR_MIN_TOKENS`` a prompt session appending 10 spaces at a time merged about 2,000 each time
(20,000 spaces with an lstrip token in the file: 0.45 s, 4x for 4x)."""
"""A piece longer than this many of the longest token's bytes (in characters) is searched for a
prefix whose ids are final (rule 3, ``peek2.bpe.growing_piece``); then again when it has grown by as
much, or doubled after a failed search."""

# What may follow a growing piece, as far as the scanner can tell: one scalar of each category
# (found in the family's table at first need) and the ASCII scalars some alternative names.
_PROBE_ASCII: Final = "\r\n\t '/0sStTrRvVmMlLdDeEaA=\u017f"
# The scalars among them that stand for themselves only after an apostrophe: the scanner reads a
# contraction ("'s", "'re", "'ll", ...) at an apostrophe one or two scalars before the probe, and
# otherwise only their category (see StreamPlan.plain_probes).
_CONTRACTION_LETTERS: Final = "sStTrRvVmMlLdDeE\u017f"


def _stream_matcher(tok: Tokenizer) -> AddedTokenMatcher:
    """The one matcher of added tokens the stream cuts its raw text with.

    tokenizers finds ``normalized: false`` tokens in the raw text, then ``normalized: true`` ones
    in the normalized text between them. Without a normalizer, and when no occurrence of one kind
    can overlap one of the other (no token holds one of the other kind, no suffix of one is a
    prefix of one of the other) and the normalized ones have no ``lstrip``/``rstrip``/
    ``single_word`` rule, that is one leftmost-longest pass over both kinds, raw first where
    contents are equal: DeepSeek-V3's file (15 normalized tokens). An ``lstrip`` token of the
    first kind also reaches back over the whitespace before it, so no normalized token may end
    with whitespace when there is one (an ``rstrip`` token's whitespace is not searched for
    normalized ones: ``normalized_in_gaps``). Anything else would need a
    second partial-match buffer on the normalized text, and is refused, naming the tokens.
    """
    normalized = list(tok._normalized_matcher.by_content.values())
    if not normalized:
        return tok._raw_matcher
    raw = [t.content for t in tok._raw_matcher.by_content.values()]
    contents = [t.content for t in normalized]
    raw_prefixes = {c[:k] for c in raw for k in range(1, len(c))}
    normalized_prefixes = {c[:k] for c in contents for k in range(1, len(c))}
    overlapping = [
        m for m in contents
        if any(m[k:] in raw_prefixes for k in range(1, len(m)))
        or any(m in r or r in m for r in raw)
    ] + [r for r in raw if any(r[k:] in normalized_prefixes for k in range(1, len(r)))]
    rules = [t.content for t in normalized if t.lstrip or t.rstrip or t.single_word]
    # An lstrip token takes the whitespace before it in the first pass, before a normalized token
    # that ends with that whitespace is looked for ("\t" normalized, then "<x>" lstrip, in "a\t<x>":
    # tokenizers gives "a", "<x>"; one leftmost pass took "\t" first, a bug hunt).
    taken = [c for c in contents if c[-1] in WHITESPACE] if any(t.lstrip for t in tok._raw_matcher.by_content.values()) else []
    if tok.spec.normalizer is not None or overlapping or rules or taken:
        raise NotImplementedError(
            "streaming encode does not support these added tokens with normalized=true "
            f"({sorted(overlapping or rules or taken or contents)[:3]}...): "
            + ("the file has a normalizer" if tok.spec.normalizer is not None else
               "they overlap tokens matched before normalization" if overlapping else
               "they have lstrip, rstrip or single_word" if rules else
               "they end with whitespace that an lstrip token matched before normalization may take")
        )
    return AddedTokenMatcher([*tok._raw_matcher.by_content.values(), *normalized], normalized_in_gaps=True)


class StreamPlan:
    """What a tokenizer's added tokens and normalizer mean for streaming (built once per tokenizer)."""

    def __init__(self, tok: Tokenizer) -> None:
        self.matcher: Final[AddedTokenMatcher] = _stream_matcher(tok)
        self.stage2: Final[bytes] = tok._engine.stage2
        self.tok_engine: Final[BytePairEncoder] = tok._engine
        self.vocab: Final[dict[bytes, int]] = tok.spec.vocab
        self.id_bytes: Final[tuple[bytes | None, ...]] = tok._id_bytes
        self.long_pieces: Final[LongPieces] = tok._long_pieces
        self.rules: Final[int] = tok._engine.rules
        self.nfc: Final[bool] = tok.spec.normalizer == "NFC"
        tokens = list(self.matcher.by_content.values())
        contents = [t.content for t in tokens if t.content]
        # Every non-empty prefix of every token, the whole token included (see peek2.serving.streaming).
        self.prefixes: Final[frozenset[str]] = frozenset(c[:k] for c in contents for k in range(1, len(c) + 1))
        self.first_chars: Final[frozenset[str]] = frozenset(c[0] for c in contents)
        self.first_text: Final[str] = "".join(sorted(self.first_chars))  # searched per chunk (one "<" for Llama-3 and Qwen)
        self.max_len: Final[int] = max((len(c) for c in contents), default=0)
        self.contents: Final[tuple[str, ...]] = tuple(contents)
        self.open_prefixes: Final[dict[str, bool]] = {}  # open_prefix's answers (a str of prefixes -> bool)
        self.lstrip: Final[bool] = any(t.lstrip for t in tokens)
        self.rstrip_ids: Final[frozenset[int]] = frozenset(t.id for t in tokens if t.rstrip)
        # single_word tokens look at the character before a match: never cut just before one.
        self.single_first: Final[frozenset[str]] = frozenset(t.content[0] for t in tokens if t.single_word and t.content)
        self.needles: Final[tuple[str, ...]] = tuple(self.matcher.needles)
        spec = tok.spec
        # Rule 3 (peek2.bpe.growing_piece): only where every piece is merged from its bytes by rank,
        # and made on first need (its vocabulary of bytes and probes cost a few ms).
        self.growing: GrowingPiece | None = None
        self.probes: list[str] = []
        self.rest_probes: list[str] = []  # ``_same_piece``'s: the probes, and whitespace then a newline
        # The probes without the contraction letters whose category another probe has, and the
        # same for rest_probes: enough where no apostrophe is among a text's last two scalars.
        self.plain_probes: list[str] = []
        self.plain_rest_probes: list[str] = []
        # Whitespace to the scanner (what a run of it may hold), and whether a whitespace run's
        # first piece goes on to its last newline whatever follows (``\s*[\r\n]+``; cl100k's
        # ``\s++$`` takes the whole run at the end of a text, so on past that newline; not GPT-2's
        # pattern, whose run gives its last space to what follows).
        pattern = tok.pattern
        self.space_chars: Final[str] = "".join(c for c in sorted(WHITESPACE) if pattern.split_ends(" " + c + " " + c) == [4])
        self.newline_cut: Final[bool] = pattern.split_ends("  \n  ") in ([3, 5], [5]) and pattern.split_ends("  \n  x")[0] == 3
        # A scalar's bytes and the first byte of the next -> whether a token may cross between them
        # (peek2.serving.marks_run asks, pair by pair).
        self.crossings: Final[dict[bytes, bool]] = {}
        self.token_blob: bytes = b""  # every token after a NUL (made at first need), searched by that module
        # (the tokenizer's, read at its load: a pass over the vocabulary's 128-200K tokens cost
        # 4-6 ms of the first stream)
        longest: int = max(tok._longest_token, 1)
        self.interior_min: Final[int] = INTERIOR_MIN_TOKENS * longest
        self.interior_min_again: Final[int] = INTERIOR_MIN_TOKENS_FINISHED_AGAIN * longest
        self.memo_step: Final[int] = MEMO_STEP_TOKENS * longest
        self.run_merges: Final[dict[tuple[str, int], list[int]]] = {}  # (see merged)

    def merged(self, piece: str) -> list[int]:
        """The ids of ``piece`` merged from its bytes (a new list). Those of a run of one character
        are remembered (``run_merges``): a prompt session's finish merges the unfinished rest of
        a growing piece at every append, and in a run of one character the same rests come back."""
        n = len(piece)
        if n < RUN_MERGE_MIN or piece.count(piece[0]) != n:
            return self.tok_engine.merge(piece.encode("utf-8"))
        key = (piece[0], n)
        run_merges = self.run_merges
        known = run_merges.get(key)
        if known is None:
            known = self.tok_engine.merge(piece.encode("utf-8"))
            if len(run_merges) >= RUN_MERGES_MAX:
                run_merges.clear()
            run_merges[key] = known
        return list(known)

    def growing_piece(self) -> GrowingPiece:
        growing = self.growing
        if growing is None:
            growing = self.growing = self.long_pieces.growing_piece()  # (the tokenizer's: one index of its tokens)
            seen: set[int] = set()
            probes: list[str] = []
            for char in _PROBE_ASCII:  # (first: each stands for itself)
                probes.append(char)
                seen.add(category(ord(char), self.stage2))
            probes += first_of_each_category(self.stage2, seen)
            self.probes = probes
            # Read from a cut in the newlines of a punctuation piece (``[\r\n]*``), the scanner
            # is in ``\s*[\r\n]+``, which goes on over whitespace that a later newline follows:
            # the two part at the second character after the run (DeepSeek-V3, "!" + "\r\n" *
            # 1500 + " \n" streamed, gave other ids until these probes came).
            two = [c + newline for c in probes if c in WHITESPACE for newline in ("\n", "\r")]
            self.rest_probes = probes + two
            others = {category(ord(c), self.stage2) for c in probes if c not in _CONTRACTION_LETTERS}
            plain = [c for c in probes if c not in _CONTRACTION_LETTERS or category(ord(c), self.stage2) not in others]
            self.plain_probes = plain
            self.plain_rest_probes = plain + two
        return growing


    def open_prefix(self, text: str) -> bool:
        """Whether ``text`` is the start of an added token and holds none whole (one is not found in
        it yet, whatever the rules: a stream holds it all, as _advance concludes)."""
        if text not in self.prefixes:
            return False
        known = self.open_prefixes.get(text)
        if known is None:
            known = not any(content in text for content in self.contents)
            self.open_prefixes[text] = known  # (bounded: keys are prefixes of the added tokens)
        return known

    def probes_after(self, text: str) -> list[str]:
        """The probes that may end ``text``'s last piece in different places (made by growing_piece)."""
        return self.probes if "'" in text[-2:] else self.plain_probes

    def rest_probes_after(self, text: str, rest: str) -> list[str]:
        """``rest_probes`` for ``text`` and ``rest`` alike (see probes_after)."""
        return self.rest_probes if "'" in text[-2:] or "'" in rest[-2:] else self.plain_rest_probes


_PLANS: Final[weakref.WeakKeyDictionary[Tokenizer, StreamPlan]] = weakref.WeakKeyDictionary()


def plan_of(tok: Tokenizer) -> StreamPlan:
    """The tokenizer's plan; raises NotImplementedError for added tokens streaming cannot handle."""
    plan = _PLANS.get(tok)
    if plan is None:
        plan = _PLANS[tok] = StreamPlan(tok)
    return plan


# ==== NFC: where a normalization run may be cut ====

_mark_runs: list[re.Pattern[str]] = []


def _marks_from(raw: str, k: i64, floor: i64) -> i64:
    """The start of the run of combining marks (class not 0) that ends at ``raw[k]``, not below
    ``floor`` (``k + 1`` when ``raw[k]`` is none). A cut is never safe before a mark, so the walk
    back to a cut jumps over the run: a step a character cost 0.15 us (a fresh str, its hash and
    set lookups; 200,000 marks fed to a stream in slices of 16,384 cost 0.03 s of feeds, half of
    what the whole encode costs). Read in C, in reversed windows that double: the cost is the
    run's length, however far ``floor`` is."""
    if not _mark_runs:
        _mark_runs.append(re.compile(f"[{MARK_CLASS}]*"))
    marks = _mark_runs[0]
    start: i64 = k + 1
    size: i64 = 64
    while start > floor:
        low = max(floor, start - size)
        window = raw[low:start][::-1]
        run = marks.match(window)
        length: i64 = 0 if run is None else run.end()
        start -= length
        if length < len(window):
            break
        size *= 2
    return start


def _nfc_inert(text: str) -> bool:
    """Whether ``text`` holds no scalar near which NFC may change text and none the reference does
    not know (``inert_scalars``): NFC leaves it as it is, and may cut before each scalar. (A set of
    them, 2,850 scalars: ``re`` tried the class's ranges one by one on a scalar past them, 0.3 us a
    CJK character fed; a frozenset made a str a scalar: a bitmap, ``ScalarSet``.)"""
    return text.isascii() or inert_scalars().first_in(text, 0) < 0


def _is_l_jamo(cp: int) -> bool:
    return 0x1100 <= cp <= 0x1112


def _nfc_cut_before(raw: str, k: int, sticky: frozenset[str]) -> bool:
    """Whether a cut just before ``raw[k]`` (a sticky scalar, ``k >= 1``) is safe all the same,
    from what precedes it: NFC of the two sides is NFC of the whole.

    A Hangul vowel jamo joins only a leading jamo just before it, and a trailing jamo only an LV
    syllable or a leading-vowel pair just before it (a run of alternating jamo was held whole:
    a prompt session fed one re-encoded it at every append). A class-0 second half of a
    composition joins only the scalar before it, when that one is not sticky itself (its NFC is
    then its own) and the two compose; after a mark, it is blocked by a mark NFC keeps, or meets
    a composite of a starter and marks, which none of the scalars it composes with is (except
    for a few: Kannada U+0CD5 composes with U+0CCA).
    """
    cp = ord(raw[k])
    before = ord(raw[k - 1])
    if 0x1161 <= cp <= 0x1175:
        return not _is_l_jamo(before)
    if 0x11A8 <= cp <= 0x11C2:
        if 0xAC00 <= before <= 0xD7A3 and (before - 0xAC00) % 28 == 0:
            return False
        return not (0x1161 <= before <= 0x1175 and k >= 2 and _is_l_jamo(ord(raw[k - 2])))
    if raw[k] in STREAM_STICKY_SECONDS_AFTER_MARKS and unicodedata2.combining(raw[k - 1]):
        return True
    if raw[k] in STREAM_STICKY_SECONDS and raw[k - 1] not in sticky:
        pair = raw[k - 1 : k + 1]
        alone = str(unicodedata2.normalize("NFC", raw[k - 1]))
        return str(unicodedata2.normalize("NFC", pair)) == alone + raw[k]
    if raw[k] in STREAM_STICKY_SECONDS and raw[k - 1] in STREAM_STICKY_SECONDS:
        # After another such second half P, NFC of the text before the cut ends with P or with a
        # composite NFC made of P (P is a starter: it joins only the scalar just before it): the cut
        # is safe when none of those joins this one (a run of Tamil U+0BBE was held whole; a bug hunt).
        last = raw[k - 1]
        return all(str(unicodedata2.normalize("NFC", end + raw[k])) == end + raw[k] for end in (last, *COMPOSITES_BY_SECOND.get(last, "")))
    return False


# ==== Encoding ====


# A run of one category is read by the scanner in one loop: where its piece ends depends on the
# run's first and last scalars, not on its length. Probes read RUN_SAMPLE of each.
RUN_SAMPLE: Final = 16


def _short_run(text: str, start: i64, whole: i64, stage2: bytes, rules: i64) -> str:
    """``text``, whose tail from ``start`` is a run of one category, with the middle of the run left
    out (``text`` itself where the run is short, or where the shortened text's first piece does not
    end at the same place from its end as ``text``'s, ``whole``)."""
    n = len(text)
    if n - start <= 4 * RUN_SAMPLE:
        return text
    short = text[: start + RUN_SAMPLE] + text[n - RUN_SAMPLE :]
    if piece_end(short, 0, len(short), stage2, rules) != whole - (n - len(short)):
        return text
    return short


def _end_before(text: str, short: str, start: i64, probe: str, stage2: bytes, rules: i64) -> i64:
    """Where ``text``'s first piece ends before ``probe``, read in ``short`` (see _short_run: the
    run from ``start`` shortened). An end in the run's first sample, whose place in ``text`` the
    short text cannot tell, is read in ``text``."""
    if len(short) == len(text):
        return piece_end(text + probe, 0, len(text) + len(probe), stage2, rules)
    end = piece_end(short + probe, 0, len(short) + len(probe), stage2, rules)
    if end <= start + RUN_SAMPLE:
        return piece_end(text + probe, 0, len(text) + len(probe), stage2, rules)
    return end + (len(text) - len(short))


def _output_list(out: object) -> list[int]:
    """The list ``feed``/``finish`` append to: the caller's, or a new one."""
    if out is None:
        return []
    if not isinstance(out, list):  # (a subclass too: it is a list; it was refused, a bug hunt)
        raise TypeError(f"out must be a list, not {type(out).__name__}")
    return out


class StreamEngine:
    """The state and work of one ``StreamEncoder`` (see there for the interface)."""

    def __init__(self, tokenizer: Tokenizer, add_special_tokens: bool, split_special_tokens: bool) -> None:
        plan = plan_of(tokenizer)
        self.tok: Final = tokenizer
        self.plan: Final = plan
        self.engine: Final[BytePairEncoder] = tokenizer._engine
        self.split_special: Final = split_special_tokens
        self.add_special: Final = add_special_tokens
        # No normalizer or whitespace rule to respect: a chunk without (the start of) an added
        # token is final at the raw level as a whole (see feed).
        self.plain: Final = not (plan.nfc or plan.lstrip or plan.single_first)
        # The same with NFC, for ASCII (see feed).
        self.nfc_plain: Final = plan.nfc and not (plan.lstrip or plan.single_first)
        self.fed_bytes = False
        self.tail = b""  # the start of a UTF-8 sequence the next bytes complete
        self.raw = ""  # raw text whose segmentation or normalization may still change
        self.searched: i64 = 0  # raw[:searched] holds no needle of an added token (searched again only past it)
        # -1, or: raw starts inside the whitespace run an rstrip token already sent is taking, and
        # raw[:absorbed] is known to be whitespace (see _raw_limit; walked forward only past it).
        self.absorbed: i64 = -1
        # raw[ws_memo[0]:ws_memo[1]] is whitespace, after a character that is not (or the start):
        # the last walk back over whitespace for lstrip, not walked again (see _raw_limit).
        self.ws_memo: tuple[i64, i64] = (0, 0)
        # Set by _raw_limit: the cut is inside the whitespace of the rstrip token(s) the raw text
        # ends with, which are sent, the rest of their whitespace staying absorbed.
        self.cut_run = False
        self.matches: list[tuple[int, int, int, bool]] = []  # every match of the last spans (see AddedTokenMatcher.spans)
        self.text = ""  # normalized text of the open segment, from a piece boundary, not encoded
        # The last rule 1 search that found no boundary: text[checked_from:checked_to] as it was
        # then (see _piece_cut).
        self.checked_from: i64 = 0
        self.checked_to: i64 = 0
        self.checked = ""
        self.started = False
        self.finished = False
        # Whether a finish keeps memos for the next (``_finish_run``, ``_finish_piece``,
        # ``_finish_marks``): only where the stream is finished again after a ``restore``, as a
        # prompt session's and a prompt cache's are (they take a ``snapshot`` first). A stream
        # finished once gains nothing from them: async_encode of "e" + "\u0301\u0323" * 100,000
        # spent 0.06 s of its 0.12 s in the marks' memo, interpreted, where encode takes 0.07 s
        # (a bug hunt).
        self.memos = False
        self.broken = False  # an exception (not a bad chunk) left the state half changed
        # (an attribute, not the constant, so that tests can make rule 2 run on short texts)
        self.rescan_min: i64 = RESCAN_MIN
        self.rescan_at: i64 = RESCAN_MIN
        self.nfc_memo: tuple[i64, i64, i64] = _NO_MEMO  # (start, result, segment start) of the last NFC walk back
        # Rule 3: ``text`` starts inside a piece whose first ids were sent (its first piece is then
        # merged from its bytes, never looked up whole); when rule 3 tries next; the category of the
        # run it last cut (-1: none), whose probes need not run again while the run goes on.
        self.cont = False
        # With ``cont``, how many first characters of ``text`` are the head of the piece, already
        # sent, kept only so that the scanner reads the rest as it reads it after that head (see
        # _interior_cut).
        self.head: i64 = 0
        self.interior_floor: i64 = plan.interior_min  # interior_at after a cut (see INTERIOR_MIN_TOKENS_FINISHED_AGAIN)
        self.interior_at: i64 = plan.interior_min
        self.run_kind: i64 = -1
        # A ByteLevel's add_prefix_space: the next text appended starts a segment, which gets a
        # space before it unless it starts with one (the first character decides, so it is final).
        self.prefix_space: Final = tokenizer._prefix_space
        self.need_space: bool = tokenizer._prefix_space
        # What finish() knows of a pending text that ends in a long run of one character whose
        # ids are not final (a later character may still join the run to what precedes it, as a
        # newline after "\n" + spaces does): see _finish_run. Kept across restore(), so that a
        # prompt session, which finishes a copy after every append, reuses it.
        # (prefix, the characters the rest may hold, the prefix's ids, made at length, the piece ends at the last newline)
        self.run_memo: tuple[str, str, list[int], i64, bool] | None = None
        self.run_retry: i64 = 0  # pending length below which no memo is tried again
        # ``head`` if ``cont`` else -1, when run_memo was made (its ids count the first piece that way)
        self.run_memo_cont: i64 = -1
        # The same for a long last piece of any kind (see _finish_piece), kept across restore():
        # (the text its claims hold for, where its pieces start up to the long one, where the
        # final ids end, those ids)
        self.piece_memo: tuple[str, list[int], i64, list[int]] | None = None
        self.piece_retry: i64 = 0
        self.piece_memo_cont: i64 = -1  # (as run_memo_cont)
        # The length of a memo's rest (merged at every finish) below which growing the memo is not
        # tried again after a failed try (``retry_after``). (It was the whole text's length doubling: after
        # one failure at 80K characters the rest grew to 80K, merged at every append.)
        self.memo_retry: i64 = 0
        # How many first ids of the last finish's result are the memo's (0: it did not start with
        # them), that count before this finish, and how many first ids of the last finish's
        # result are known to be those of the finish before it (a prompt session's ``keep``).
        self.memo_given: i64 = 0
        self.given_before: i64 = 0
        self.finish_stable: i64 = 0
        # The same for a long NFC run of combining marks of several classes (see there), kept across restore().
        self.marks_run: MarksRun | None = None
        # ``marks_run.answered`` after the last finish, when that finish was its answer (else -1),
        # and the same before this finish: its ``same_ids`` counts ids of that answer.
        self.marks_last: i64 = -1
        self.marks_before: i64 = -1
        # Set during ``finish_copy`` alone: its list goes to a prompt session, which never changes
        # it or hands it out, so ``MarksRun`` may grow its last answer in place (see there).
        self.answer_to_session = False

    def pending_chars(self) -> int:
        return len(self.raw) + len(self.text)

    def feed(self, chunk: object, out: object = None) -> list[int]:
        if self.broken:
            raise RuntimeError("this stream was interrupted inside a feed() or finish(): make a new stream_encoder()")
        if self.finished:
            raise RuntimeError("feed() after finish(): make a new stream_encoder() for a new text")
        # Everything wrong with the call is found before the stream changes, so that a caller can
        # reject one bad chunk and go on (issue 23 item 5): the chunk's type, UTF-8, lone
        # surrogates, and ``out`` (checked first: a bug hunt found a bad ``out`` after a bytes
        # chunk had taken the held bytes of a character).
        ids = _output_list(out)
        if isinstance(chunk, str):
            if self.tail and chunk:  # (an empty str changes nothing: refused there, a bug hunt)
                raise ValueError("a str chunk was fed while a UTF-8 sequence from bytes is incomplete")
            if first_surrogate(chunk) >= 0:
                raise surrogate_error(chunk, ValueError("lone surrogate"))  # the index in this chunk
            text = chunk
        elif isinstance(chunk, bytes):  # (apart: a tuple in isinstance costs a lookup and an allocation)
            text = self._decode(chunk)
        elif isinstance(chunk, (bytearray, memoryview)):
            text = self._decode(bytes(chunk))
        else:
            raise TypeError(f"chunk must be str or bytes, not {type(chunk).__name__}")
        owned = out is None
        mark = len(ids)
        # (Where the text may turn out to be one tokenizers cannot encode: the state to go back to.)
        before = self._state() if self.plan.lstrip and self.plan.rstrip_ids else None
        try:
            if not self.started:
                self._start(ids)
            if not text:
                return ids
            if self.plain and not self.raw and self.absorbed < 0 and not self._may_start_token(text):
                # The usual chunk: all of it is final at the raw level (what _advance would
                # conclude, for a third of its cost).
                pending = self.text
                self.text = ""
                pending += self._opened(text) if self.need_space else text  # the only reference: grown in place (no quadratic copies)
                self.text = pending
                ids = self._encode_final(ids, owned)
            elif self.nfc_plain and self.absorbed < 0 and len(self.raw) <= 1 and self._feed_inert(self.raw + text):
                ids = self._encode_final(ids, owned)
            elif self.absorbed < 0 and len(self.raw) + len(text) < self.plan.max_len and self.plan.open_prefix(self.raw + text):
                # The start of an added token, growing: _advance would move nothing (its limit is
                # 0, before the token's first character) and encode nothing new. ("<|eot_id|>" *
                # 10,000 fed a character at a time: 0.15x one encode by tokenizers; a bug hunt.)
                self.raw += text
            else:
                raw = self.raw
                self.raw = ""
                raw += text  # in place, as above
                self.raw = raw
                ids = self._advance(ids, owned, False)
            return ids
        except UnencodableText:
            # Found before anything was encoded (the added tokens are matched first): refused as
            # a bad chunk is, the stream as it was.
            del ids[mark:]
            if before is None:
                self.broken = True
            else:
                self.restore(before)
            raise
        except BaseException:
            # Not the chunk's fault (an interrupt, no memory): the pending text may be half moved.
            del ids[mark:]
            self.broken = True
            raise

    def _feed_inert(self, held: str) -> bool:
        """Text NFC leaves as it is (ASCII, CJK, ...) with NFC, after at most one character held:
        none of its scalars joins what precedes it, so all but the last character is final at the
        raw level (a later mark may join the last): what _advance concludes, at the cost of the
        plain chunk (False, changing nothing: not such text, or the start of an added token may
        be in it). (Qwen3's stream fed English a character at a time: 0.69x one encode by
        tokenizers; a bug hunt.)"""
        if not _nfc_inert(held) or self._may_start_token(held):
            return False
        n: i64 = len(held)
        if n > 1:
            pending = self.text
            self.text = ""
            moved = held[: n - 1]
            pending += self._opened(moved) if self.need_space else moved
            self.text = pending
            ws_from, ws_to = self.ws_memo
            self.ws_memo = (max(0, ws_from - (n - 1)), ws_to - (n - 1)) if ws_to > n - 1 else (0, 0)
            self.raw = held[n - 1 :]
        else:
            self.raw = held
        self.searched = 1
        self.nfc_memo = _NO_MEMO
        self.cut_run = False
        self.matches.clear()
        return True

    def finish(self, out: object = None) -> list[int]:
        if self.broken:
            raise RuntimeError("this stream was interrupted inside a feed() or finish(): make a new stream_encoder()")
        if self.finished:
            raise RuntimeError("finish() was already called")
        ids = _output_list(out)
        mark = len(ids)
        rest = ""
        if self.fed_bytes:
            rest = utf_8_decode(self.tail, "strict", True)[0]  # raises for an incomplete sequence, changing nothing
        self.given_before = self.memo_given
        self.memo_given = self.finish_stable = 0
        self.marks_before = self.marks_last
        self.marks_last = -1
        before = self._state() if self.plan.lstrip and self.plan.rstrip_ids else None
        tail = self.tail
        try:
            self._start(ids)
            self.tail = b""
            self.raw += rest
            self.finished = True
            ids = self._advance(ids, out is None, True)
            if self.add_special:
                ids += self.tok._suffix_ids
            return ids
        except UnencodableText:
            del ids[mark:]  # (as in feed)
            if before is None:
                self.broken = True
            else:
                self.restore(before)
                self.tail = tail
            raise
        except BaseException:
            del ids[mark:]
            self.broken = True
            raise

    def _decode(self, data: bytes) -> str:
        """The characters ``data`` completes; keeps the start of a sequence it leaves incomplete."""
        if self.tail:
            data = self.tail + data
        decoded = _UTF8_DECODE(data, "strict", False)  # raises UnicodeDecodeError for invalid bytes
        text: str = decoded[0]
        used: int = decoded[1]
        self.tail = data[used:] if used < len(data) else b""
        self.fed_bytes = True
        return text

    def _start(self, out: list[int]) -> None:
        """The post-processor's prefix ids go first, at the first call."""
        if not self.started:
            self.started = True
            if self.add_special:
                out += self.tok._prefix_ids

    def finish_copy(self) -> list[int]:
        """The ids ``finish`` gives now, the stream going on from before it (a prompt session's
        answer after each append): a snapshot, a finish and a restore. Where nothing is raw and
        the pending text is short and starts a piece, that finish merges the pending text and
        changes nothing a restore keeps, so it is done here alone (the three calls cost a session
        fed English a character at a time 1-2 us an append, 0.24x one encode by tokenizers).
        "Short" is ``_short``: a pending text that is never cut (a whitespace run after its last
        newline) goes to ``_flush``'s memos from twice a session's rule 3 threshold (from
        ``interior_min``, a session fed ``"\\n" + " " * 2000`` a character at a time merged the run
        at every append: 4x the run, 16.8x the time)."""
        text = self.text
        raw = self.raw
        if raw:
            # One character NFC held (see feed), no start of an added token: finish appends
            # it to the pending text as it is (its own NFC, and no space to open a segment with).
            if not (self.nfc_plain and len(raw) == 1 and self.absorbed < 0 and not self.need_space and raw not in self.plan.first_chars and _nfc_inert(raw)):
                return self._finish_restored()
            text += raw
        if self.started and self.memos and not (self.fed_bytes or self.cont or self.finished or self.broken) and self._short(text):
            self.given_before = self.memo_given  # (as finish and restore leave them)
            self.memo_given = self.finish_stable = 0
            self.marks_last = -1
            self.searched = 0
            ids: list[int] = self.engine.encode_list_prefix(text, len(text), []) if text else []
            if self.add_special:
                ids += self.tok._suffix_ids
            return ids
        return self._finish_restored()

    def _short(self, text: str) -> bool:
        """Whether ``finish_copy`` merges the pending ``text`` itself: below twice a session's rule 3
        threshold, or below rule 3's first threshold unless it ends in a long whitespace run (two
        scalars read), which a later newline may join to the piece before and ``_flush``'s memos
        keep. (Sending all of it from twice a session's threshold on took the memos' checks and a
        snapshot at every append of many short pending pieces: 2,000 digits, or "/\\n" repeated,
        one character at a time, Llama-3.1, 10.9-12.1 and 12.8-13.3 ms, against 9.7-10.1 and
        11.2-11.9 with this test.)"""
        n = len(text)
        plan = self.plan
        if n < 2 * plan.interior_min_again:
            return True
        if n >= plan.interior_min:
            return False
        return not (text[n - 1] in plan.space_chars and text[n - plan.interior_min_again] in plan.space_chars)

    def _finish_restored(self) -> list[int]:
        state = self.snapshot()
        self.answer_to_session = True
        try:
            ids = self.finish()
        finally:
            self.answer_to_session = False
        self.restore(state)
        return ids

    # The state the prompt cache keeps at a checkpoint (peek2.serving.incremental).
    def snapshot(self) -> StreamState:
        if self.fed_bytes:
            raise ValueError("a checkpoint of an encoder fed bytes is not supported")
        self.memos = True
        floor = self.plan.interior_min_again
        if self.interior_floor > floor:
            self.interior_floor = floor
            self.interior_at = min(self.interior_at, floor)
        return self._state()

    def _state(self) -> StreamState:
        return (
            self.raw, self.text, self.started, self.rescan_at, self.cont, self.interior_at, self.run_kind, self.need_space, self.nfc_memo, self.head,
            self.absorbed, self.ws_memo,
        )

    def copy(self) -> StreamEngine:
        """A new engine in this one's state, sharing nothing that changes with it (``copy.copy``
        of a ``StreamEncoder``: a branch of the stream). It starts as the prompt cache's engines
        start from a checkpoint (``restore``), plus what a checkpoint leaves out: the bytes of an
        incomplete character, and whether the stream was finished or broken."""
        other = StreamEngine(self.tok, self.add_special, self.split_special)
        other.rescan_min = self.rescan_min
        other.restore(self._state())
        other.fed_bytes = self.fed_bytes
        other.tail = self.tail
        other.finished = self.finished
        other.broken = self.broken
        other.memos = self.memos
        other.interior_floor = self.interior_floor
        return other

    def restore(self, state: StreamState) -> None:
        """Back to the state of ``snapshot`` (also after ``finish``: a prompt session finishes a copy of its text)."""
        (
            self.raw, self.text, self.started, self.rescan_at, self.cont, self.interior_at, self.run_kind, self.need_space, self.nfc_memo, self.head,
            self.absorbed, self.ws_memo,
        ) = state
        self.searched = 0
        self.finished = False
        self.broken = False

    def _advance(self, out: list[int], owned: bool, final: bool) -> list[int]:
        """Move what is final from ``raw`` into ``text``, and encode what is final in ``text``.

        Returns the list the ids went to: ``out``, or a new one when ``owned`` (see _encode_final).
        """
        raw = self.raw
        matcher = self.plan.matcher
        # A held NFC run grows by one character a feed at worst: searching all of it for added
        # tokens each time was quadratic (320K marks fed one by one: 3.3 s).
        absorbed = self.absorbed
        if absorbed >= 0:  # (the run's end: walked only past what earlier feeds walked)
            while absorbed < len(raw) and raw[absorbed] in WHITESPACE:
                absorbed += 1
            self.absorbed = absorbed
        matches = self.matches
        matches.clear()
        if matcher.has_needle(raw, self.searched):
            # (Spans, not lengths: after an rstrip token the next span may start inside it.)
            segments: list[tuple[int, int, int]] = matcher.spans(raw, self.split_special, matches, absorbed, not final)
        else:
            start: i64 = max(0, absorbed)
            segments = [(start, len(raw), -1)] if start < len(raw) else []
            self.searched = len(raw)
        limit = len(raw) if final else self._raw_limit(raw, segments)
        normalize = self.tok._normalize
        if final and self.memos and self.plan.nfc and len(raw) >= self.interior_floor and not self.need_space:
            if len(segments) == 1 and segments[0][2] < 0:
                ids = self._finish_marks(raw)
                if ids is not None:
                    marks = self.marks_run
                    if marks is not None:
                        answered: i64 = marks.answered
                        if not out and answered - 1 == self.marks_before:
                            self.finish_stable = marks.same_ids  # (the first ids of the last finish's result)
                        self.marks_last = answered
                    self.raw = self.text = ""
                    self.cont = False
                    self.head = 0
                    self.run_kind = -1
                    self.searched = 0
                    self.rescan_at = self.rescan_min
                    self.interior_at = self.interior_floor
                    if owned:
                        return out + ids if out else ids  # (a prompt session's finish: no copy of the run's ids)
                    out += ids
                    return out
        if not self.plan.nfc and len(segments) == 1 and segments[0][2] < 0:
            first = segments[0][0]
            segments = []  # the usual chunk: one text segment and no normalizer, moved below at once
            if first < limit:
                text = self.text
                moved = raw[first:limit] if first or limit < len(raw) else raw
                self.text = text + (self._opened(moved) if self.need_space else moved)
        cut_run = self.cut_run and not final
        for at, end, token_id in segments:
            if end <= limit or (cut_run and token_id >= 0):
                if token_id >= 0:
                    out = self._flush(out, owned)  # the open segment ends at an added token
                    owned = False  # out is now this call's own list: append to it, never copy it again
                    out.append(token_id)
                    self.need_space = self.prefix_space  # a new text segment starts after it
                else:
                    self._append(normalize(raw[at:end]))
            else:
                if token_id < 0 and at < limit:
                    self._append(normalize(raw[at:limit]))
                break
        if limit and not final:
            # Where the text after the cut starts in the reference (its ``done``): past the cut
            # only in the whitespace an rstrip token took (see _raw_limit).
            done = max(0, absorbed)
            run = absorbed >= 0  # (and done the end of a run of whitespace at the end of raw, so far)
            for found, _, stop, rstrip in matches:
                if found < limit and stop >= 0:
                    done = stop
                    run = rstrip
            self.absorbed = done - limit if done > limit or (done == limit == len(raw) and run) else -1
        if limit:
            self.raw = raw[limit:]
            self.searched = max(0, self.searched - limit)
            self.nfc_memo = _NO_MEMO  # positions in raw moved
            ws_from, ws_to = self.ws_memo
            self.ws_memo = (max(0, ws_from - limit), ws_to - limit) if ws_to > limit else (0, 0)
        else:
            self.raw = raw
        if final:
            return self._flush(out, owned)
        return self._encode_final(out, owned)

    def _may_start_token(self, text: str) -> bool:
        """True when an added token, or the start of one, may be in ``text``."""
        plan = self.plan
        # Perhaps the first character of a token the next chunk completes.
        firsts = plan.first_text
        if len(firsts) <= 32:
            last: i64 = ord(text[len(text) - 1])  # (no str made, as text[-1] would be)
            for k in range(len(firsts)):
                if ord(firsts[k]) == last:
                    return True
        elif text[-1] in plan.first_chars:
            return True
        for needle in plan.needles:
            if needle[0] in text and needle in text:  # (see Tokenizer._plain)
                return True
        return False

    def _encode_final(self, out: list[int], owned: bool) -> list[int]:
        """Encode the pending text up to its last final piece boundary.

        The ids are appended to ``out``, or, when ``owned`` (a list of this call, no caller's),
        go with ``out``'s into a new list made at its final size, as ``encode`` makes its list.
        """
        cut = self._piece_cut()
        if cut:
            text = self.text
            out = self._encode(text, cut, out, owned)
            owned = False  # out is now this call's own list
            self.text = text[cut:]
            self.rescan_at = max(self.rescan_min, 2 * len(self.text))
            self.interior_at = self.interior_floor
        if len(self.text) >= self.interior_at:
            text = self.text
            if self.plan.newline_cut and text[len(text) - 1] in self.plan.space_chars:
                cut_out = self._newline_cut(out, owned)
                if cut_out is not None:
                    return cut_out
            out = self._interior_cut(out, owned)
        return out

    def _newline_cut(self, out: list[int], owned: bool) -> list[int] | None:
        """Rule 3 for a growing whitespace run that holds a newline (" \\n" repeated): send the ids
        of a prefix of its ``\\s*[\\r\\n]+`` piece that no continuation changes (None: no cut).

        Whatever follows, that piece goes on at least to the run's last newline (the ``\\s*`` takes
        the whole run, then gives back up to it), so it is a growing piece as rule 3 wants; a cut
        before that newline leaves a text whose first piece, read from the cut, ends where it ends
        read from its start (checked, with every probe). Without this the run stayed pending whole:
        a prompt session fed one merged it again at every append.
        """
        plan = self.plan
        text = self.text
        n = len(text)
        w = len(text.rstrip(plan.space_chars))  # where the whitespace run starts
        newline = max(text.rfind("\n", w), text.rfind("\r", w))
        if newline < 0:
            return None
        ends: list[int] = self.tok.pattern.split_ends(text)
        k = bisect.bisect_right(ends, newline)  # the piece that holds the last newline (cl100k: to the end)
        start: i64 = ends[k - 1] if k else 0
        if start < w or newline + 1 - start < 2:
            return None
        continued = self.cont and start == 0  # the piece goes on from ids already sent
        # (after its head, when one is kept for the scanner: a whitespace run that rule 3 cut as a
        # piece of several categories, " \t" * 1500, then "\n    " repeated, held every newline)
        low: i64 = self.head if continued else start
        data = text[low : newline + 1].encode("utf-8")
        growing = plan.growing_piece()
        cut_bytes, ids = growing.final_prefix(data, 0 if continued else len(text[start].encode("utf-8")))
        if cut_bytes == 0:
            return None
        cut = low + len(data[:cut_bytes].decode("utf-8"))
        if cut > newline:
            return None
        stage2, rules = plan.stage2, plan.rules
        rest = text[cut:]
        if piece_end(rest, 0, n - cut, stage2, rules) != piece_end(text, start, n, stage2, rules) - cut:
            return None
        for probe in plan.probes_after(text):  # (rest is a suffix of text: the same probes)
            if piece_end(rest + probe, 0, n - cut + 1, stage2, rules) != piece_end(text + probe, start, n + 1, stage2, rules) - cut:
                return None
        if start:
            out = self._encode(text, start, out, owned)  # the pieces before the run's (the first one goes on, if cont)
        elif owned:
            out = list(out)
        shared = self.engine.shared
        for token_id in ids:
            out.append(shared[token_id])
        self.text = rest
        self.cont = True
        self.head = 0
        self.run_kind = -1
        self.interior_at = self.interior_floor
        self.rescan_at = max(self.rescan_min, 2 * (n - cut))
        return out

    def _encode(self, text: str, end: int, out: list[int], owned: bool) -> list[int]:
        """The ids of ``text``'s pieces before ``end`` (a piece boundary) go to ``out`` (see _encode_final)."""
        if self.cont:
            # The first piece goes on from ids already sent: merged from its bytes (rule 3), and
            # the rest as usual; the scanner looks only forward, so a slice cuts the same pieces.
            self.cont = False
            self.run_kind = -1
            first = piece_end(text, 0, len(text), self.plan.stage2, self.plan.rules)
            head = self.plan.merged(text[self.head : first]) if self.memos else self.engine.merge(text[self.head : first].encode("utf-8"))
            self.head = 0
            if owned:
                head = out + head
            else:
                out += head
                head = out
            if first < end:
                self.engine.encode_prefix(text[first:], end - first, head)
            return head
        if owned:
            return self.engine.encode_list_prefix(text, end, out)
        self.engine.encode_prefix(text, end, out)
        return out

    def _interior_cut(self, out: list[int], owned: bool) -> list[int]:
        """Rule 3: send the ids of a prefix of one long growing piece that no continuation changes.

        The pending text must be one piece so far whatever comes next (every probe). Its tail is
        a run of one category (``_run_cut``), or the scanner is in one of its loops over several
        (``_loop_cut``). Then ``peek2.bpe.growing_piece`` finds the cut.
        """
        self.interior_at = 2 * len(self.text)  # unless a cut is found (below)
        cut_out = self._run_cut(out, owned)
        if cut_out is None:
            cut_out = self._loop_cut(out, owned)
        return out if cut_out is None else cut_out

    def _run_cut(self, out: list[int], owned: bool) -> list[int] | None:
        """Rule 3 where the pending text ends in a run of one category that the cut falls in (the
        scanner reads such a run in one loop, so its length does not matter to where pieces end),
        or with o200k's rule a run of "/" and newlines mixed, and the scanner started at the cut
        must find the same piece end (every probe). None: no cut."""
        plan = self.plan
        text = self.text
        n = len(text)
        stage2 = plan.stage2
        rules = plan.rules
        kind = category(ord(text[n - 1]), stage2)
        head = self.head  # (a head kept from the last cut: see below)
        start = n - 1  # the tail run of one category: text[start:]
        while start > head and category(ord(text[start - 1]), stage2) == kind:
            start -= 1
        mixed = False
        if (rules & RULE_SLASH_AFTER_PUNCT) != 0:
            # o200k's [\r\n/]* after punctuation reads "/\n/\n..." in one loop too, though it
            # is of two categories (a prompt session appending "/\n" re-encoded all of it). Rule 3
            # holds for it with two more conditions (below): a newline after the cut, and the
            # probes run at every cut (read from a newline, the scanner is in another state
            # than read from a "/", so a cut verified once says nothing of the next).
            slash_start = self._slash_newline_run(text, head)
            if slash_start < n - 1:
                mixed = True
                start = slash_start
                kind = SLASH_NEWLINE_RUN
        if n - start < 2:
            return None
        # How far the piece surely goes: its end at the end of the text, and before each probe.
        # (The probes are made with the growing piece's tables: a fresh tokenizer's first try ran
        # with none. No text was found where they change the cut; they are the rule's premise.)
        growing = plan.growing_piece()
        whole = piece_end(text, 0, n, stage2, rules)
        reach = min(whole, n - 1)
        verified = self.cont and start == head and kind == self.run_kind and not mixed
        if reach < n - 1:
            return None
        ends: dict[str, i64] = {"": whole}  # (where the piece ends, before each probe: for _same_piece too)
        # The probes read the run shortened to its first and last RUN_SAMPLE scalars, where the
        # scanner ends it where it ends the whole run: read whole, a probe at a time, the pending
        # text cost a stream 4x an encode of it ("<|" * 2000 fed once, o200k and cl100k: 0.26x
        # tiktoken's one encode; a bug hunt).
        short = _short_run(text, start, whole, stage2, rules) if not verified and not mixed else text
        if not verified:
            for probe in plan.probes_after(text):
                # (each probe scans the whole piece: stop at the first that ends it early)
                end = _end_before(text, short, start, probe, stage2, rules)
                ends[probe] = end
                reach = min(reach, end)
                if reach < n - 1:
                    return None
        data = text[head:reach].encode("utf-8")
        first = len(text[head : start + 1].encode("utf-8"))
        cut_bytes, ids = growing.final_prefix(data, first)
        if cut_bytes == 0:
            return None
        cut = head + len(data[:cut_bytes].decode("utf-8"))
        if mixed and text.find("\n", cut) < 0 and text.find("\r", cut) < 0:
            # Read from the cut, "/" starts [^\s\p{L}\p{N}]+, which would go on into punctuation
            # that follows; the piece's [\r\n/]* would not. After a newline both read [\r\n/]*.
            return None
        kept = text[:head]
        if not verified:
            # The scanner started at the cut must end the piece where it ends from the start. If
            # it does not (o200k's "!" + "\n" * n: from a newline, \s*[\r\n]+ stops before a
            # "/", the piece's [\r\n/]* does not), the piece's head before the run is kept in
            # front of the rest (its ids sent; the scanner then reads the rest as after it).
            # A mixed run keeps its head whenever it can: read from a newline, the rest needs it.
            heads = [text[:start], ""] if mixed else ["", text[:start]]
            if start > 1:
                # The last scalar before the run alone, where all of them are too many to keep:
                # o200k's punctuation then newlines ([\r\n/]*), read from a newline, is another
                # piece (\s*[\r\n]+), and a stream of "<" * 3000 then newlines held all the
                # newlines (a bug hunt); after one "<" the scanner reads them as after all.
                heads.append(text[start - 1 : start])
            found = False
            for kept in heads:
                if len(kept) <= LOCAL_WINDOW and self._same_piece(text, kept + text[cut:], cut - len(kept), ends, short, start):
                    found = True
                    break
            if not found:
                return None
        return self._keep_after_cut(out, owned, ids, kept, cut, kind)

    def _loop_cut(self, out: list[int], owned: bool) -> list[int] | None:
        """Rule 3 in a piece of several categories (o200k's letters and marks in turn, Thai without
        spaces, DeepSeek-V3's Latin of two kinds, punctuation and marks, spaces and tabs), where
        the scanner restarted at the cut may end the piece elsewhere: the rest is kept behind
        the scanner's ``resume_context`` for the cut, a scalar or two that put the scan in the
        state it is in there (None: no cut).

        Before this such a piece was held whole until it ended, and a prompt session read it
        again from its start at every append: quadratic (GPT-4o, ``"a\u0301"`` * 200K appended
        300 characters at a time, 1.5 s, where tokenizers' one encode of it takes 0.27 s).
        """
        plan = self.plan
        text = self.text
        n = len(text)
        head = self.head
        stage2, rules = plan.stage2, plan.rules
        growing = plan.growing_piece()
        # How far the piece surely goes. Unlike a run of one category, it may stop well before
        # the end: o200k's "...\u0301AB" gives "AB" back before a space (X* backtracks to the
        # mark), so a stream of "AB\u0301\u0327" * n cut in 333-character chunks, whose text
        # mostly ended in capitals, was never cut (a bug hunt).
        whole = piece_end(text, 0, n, stage2, rules)
        reach = min(whole, n - 1)
        if reach - head < 2:
            return None
        ends: dict[str, i64] = {"": whole}  # (where the piece ends, before each probe: for _same_piece too)
        for probe in plan.probes_after(text):
            # (each probe scans the whole piece: none is scanned once the piece surely ends too
            # early; "\n" + 200,000 spaces, a piece "\n" then spaces, scanned the spaces once a
            # probe at every try: async_encode took 2x encode's time, 0.71x tokenizers'; a bug hunt)
            end = piece_end(text + probe, 0, n + 1, stage2, rules)
            ends[probe] = end
            reach = min(reach, end)
            if reach - head < 2:
                return None
        data = text[head:reach].encode("utf-8")

        def resumable(s: int) -> bool:
            # (Not every boundary has a context: o200k's capitals and marks in turn have one after
            # a mark, none after a capital; only the last boundary was tried, and a stream of
            # "A\u0301" * n held all of it, a bug hunt.)
            return resume_context(text, head + len(data[:s].decode("utf-8")), stage2, rules) is not None

        cut_bytes, ids = growing.final_prefix(data, len(text[head : max(head, 2)].encode("utf-8")), resumable)
        if cut_bytes == 0:
            return None
        cut = head + len(data[:cut_bytes].decode("utf-8"))
        context = resume_context(text, cut, stage2, rules)
        if context is None or not self._same_piece(text, context + text[cut:], cut - len(context), ends, text, 0):
            return None
        return self._keep_after_cut(out, owned, ids, context, cut, LOOP_RUN)

    def _keep_after_cut(self, out: list[int], owned: bool, ids: list[int], kept: str, cut: i64, kind: i64) -> list[int]:
        """Send the ids of the pending text before a rule 3 ``cut`` and keep the rest, behind ``kept``
        (what the scanner reads in front of it) as the piece's head; ``kind``: the run it was cut in."""
        shared = self.engine.shared
        if owned:
            out = out + [shared[token_id] for token_id in ids]
        else:
            for token_id in ids:
                out.append(shared[token_id])
        rest = len(self.text) - cut
        self.text = kept + self.text[cut:]
        self.head = len(kept)
        self.cont = True
        self.run_kind = kind
        self.interior_at = self.interior_floor
        self.rescan_at = max(self.rescan_min, 2 * rest)
        return out

    def _slash_newline_run(self, text: str, head: i64) -> i64:
        """Where the tail run of "/", "\\r" and "\\n" of ``text`` starts (not before ``head``), if
        it holds a "/" and a newline; else ``len(text)``."""
        n = len(text)
        start = n
        slash = False
        newline = False
        while start > head:
            c = text[start - 1]
            if c == "/":
                slash = True
            elif c == "\n" or c == "\r":
                newline = True
            else:
                break
            start -= 1
        return start if slash and newline else n

    def _same_piece(self, text: str, rest: str, moved: i64, ends: dict[str, i64], short: str, start: i64) -> bool:
        """Whether the first piece of ``rest`` (the text from a cut, perhaps behind a kept head,
        ``moved`` characters shorter) ends where ``text``'s first piece does, before every probe too
        (``rest_probes``: two characters where one does not tell them apart). ``ends``: where
        ``text``'s first piece ends ("") and before the probes the caller scanned, as it found
        them: each such scan reads the whole pending text, where ``rest`` is only the part after
        the cut (scanned again here, async_encode of " \t" * 80000 spent 70% of its time reading
        the pending text, 0.80x tokenizers'). ``short`` and ``start``: see _end_before."""
        plan = self.plan
        stage2, rules = plan.stage2, plan.rules
        n = len(text)
        m = len(rest)
        if piece_end(rest, 0, m, stage2, rules) != ends[""] - moved:
            return False
        for probe in plan.rest_probes_after(text, rest):
            more = len(probe)
            end = ends.get(probe, -1)
            if end < 0:
                end = _end_before(text, short, start, probe, stage2, rules)
            if piece_end(rest + probe, 0, m + more, stage2, rules) != end - moved:
                return False
        return True

    def _append(self, normalized: str) -> None:
        text = self.text
        self.text = ""
        text += self._opened(normalized) if self.need_space else normalized  # in place while one enormous piece grows (see feed)
        self.text = text

    def _opened(self, normalized: str) -> str:
        """The first normalized text of a segment, with the space ``prefix_space`` puts before it."""
        if not normalized:
            return normalized
        self.need_space = False
        return " " + normalized if normalized[0] != " " else normalized

    def _flush(self, out: list[int], owned: bool) -> list[int]:
        text = self.text
        if text:
            ids: list[int] | None = None
            # (A piece that rule 3 cut goes on from ids already sent, and its pending rest stays
            # short: merged as it is (``merged`` remembers a run of one character's), it costs
            # less than a memo's checks until ``interior_min``. A pending text never cut may grow
            # without end, so its memos start at a session's own threshold.)
            floor: i64 = self.plan.interior_min if self.cont else self.plan.interior_min_again
            if self.finished and self.memos and len(text) >= floor:
                ids = self._finish_run(text)
                if ids is None:
                    ids = self._finish_piece(text)
                    if out:  # (the memo's ids are not the result's first: no claim about them)
                        self.memo_given = self.finish_stable = 0
            if ids is None:
                out = self._encode(text, len(text), out, owned)
            elif owned:
                out = out + ids if out else ids  # (a new list of its own: a prompt session's finish, not copied again)
            else:
                out += ids
            self.text = ""
        self.rescan_at = self.rescan_min
        self.interior_at = self.interior_floor
        return out

    def _finish_run(self, text: str) -> list[int] | None:
        """The ids of the whole pending ``text`` at ``finish``, when it ends in a long run of
        whitespace (or of one character), without merging the run again at every call (None:
        encode it as usual).

        A prompt session finishes a copy of its stream after every append. A whitespace run stays
        pending (its pieces depend on where it ends: ``\\s*[\\r\\n]+`` takes it up to its last
        newline), so each finish merged the whole run again: quadratic in the run ("\\n" then spaces,
        " \\n" or "\\xa0 " repeated: 80K characters in 1K appends took 0.3-0.6 s against 0.02-0.04 s
        for one encode by tokenizers). Here rule 3's test (``peek2.bpe.growing_piece``) finds a
        prefix of the run's growing piece whose ids no continuation of the piece changes, and
        remembers it with the ids before it. At the end of the text a whitespace run from the
        piece's start is (with ``\\s*[\\r\\n]+``) one piece up to its last newline and one after it,
        or (without) one piece; so for any pending text that is that prefix followed by more
        whitespace (a plain string comparison and a ``strip``), the ids are the remembered ones and
        the merge of the rest of the piece, plus the piece after the last newline. The memo made on
        the piece after the last newline holds while no newline comes (one would join it to the
        piece before). A text of another form finds the memo invalid and makes a new one; a failed
        attempt waits until the text has grown by an eighth, and a failed attempt to grow the memo
        until its rest has (``retry_after``).
        """
        plan = self.plan
        n: i64 = len(text)
        memo = self.run_memo
        cont_from: i64 = self.head if self.cont else -1
        if memo is not None and self.run_memo_cont != cont_from:
            memo = self.run_memo = None
        if memo is not None:
            prefix, chars, ids, made, to_newline = memo
            p: i64 = len(prefix)
            if made <= n and text.startswith(prefix) and not text[p:].strip(chars):
                end = self._piece_stop(text, p, to_newline)
                if end - p >= max(plan.memo_step, self.memo_retry):
                    # The rest merges as a piece of its own (rule 3): cut it again the same way.
                    data = text[p:end].encode("utf-8")
                    cut_bytes, more = plan.growing_piece().final_prefix(data, 0)
                    if cut_bytes:
                        ids.extend(more)  # (the memo's own list)
                        p += len(data[:cut_bytes].decode("utf-8"))
                        self.run_memo = (text[:p], chars, ids, n, to_newline)
                        self.memo_retry = 0
                    else:
                        self.memo_retry = retry_after(end - p, plan.memo_step)
                return self._run_ids(text, p, end, ids)
        if n < self.run_retry:
            return None
        self.run_retry = retry_after(n, plan.memo_step)  # (unless a memo is made below)
        made_memo = self._run_memo(text)
        if made_memo is None:
            return None
        self.run_memo = made_memo
        self.run_memo_cont = cont_from
        self.run_retry = 0
        self.memo_retry = 0
        prefix, chars, ids, made, to_newline = made_memo
        p = len(prefix)
        return self._run_ids(text, p, self._piece_stop(text, p, to_newline), ids)

    def _finish_piece(self, text: str) -> list[int] | None:
        """The ids of the whole pending ``text`` at ``finish`` when its last piece is long, of any
        kind, without merging all of that piece again at every call (None: encode as usual).

        The pieces rule 3 cannot cut (see docs/serving.md; before ``_loop_cut``, o200k's letters
        and marks in turn, a Thai run without spaces, DeepSeek-V3's Latin letters of two kinds,
        GPT-2's spaces and tabs) stay pending whole, and a prompt session's finish merged each of
        them again at every append: 100K characters appended 100 at a time took 3.4-4.6 s
        (tokenizers' one encode: 0.04 s).
        Here rule 3's test (``peek2.bpe.growing_piece``) finds a prefix of the last piece whose
        ids no continuation of the piece changes, and remembers it with the ids before it. Its
        claims are checked on each later text, not assumed: it starts with the text the test
        read (``known``), the scanner finds the same piece starts up to the long piece, and the
        piece goes on at least to the end of ``known``; then the piece starts with what the
        test read, so its ids start with the remembered ones (and the pieces before are the same
        text cut in the same places). What is past the remembered prefix is merged, and cut
        again the same way once it is long. The scanner still reads the pending text at each
        finish, at its own speed (a few percent of the merge's time before).
        """
        plan = self.plan
        stage2, rules = plan.stage2, plan.rules
        n: i64 = len(text)
        memo = self.piece_memo
        cont_from: i64 = self.head if self.cont else -1
        if memo is not None and self.piece_memo_cont != cont_from:
            memo = self.piece_memo = None
        if memo is not None:
            known, starts, p, ids = memo
            self.piece_memo = None  # (unless it holds: below)
            if n >= len(known) and text.startswith(known):
                k: i64 = 0
                same = True
                for i in range(1, len(starts)):
                    k = piece_end(text, k, n, stage2, rules)
                    if k != starts[i]:
                        same = False
                        break
                end = piece_end(text, starts[len(starts) - 1], n, stage2, rules) if same else 0
                if same and end >= len(known):
                    if end - p >= max(plan.memo_step, self.memo_retry):
                        stop = end - 1 if end == n else end  # (its last character may go to a piece after it)
                        data = text[p:stop].encode("utf-8")
                        cut_bytes, more = plan.growing_piece().final_prefix(data, 0)
                        if cut_bytes:
                            ids.extend(more)  # (the memo's own list)
                            known = text[:stop]
                            p += len(data[:cut_bytes].decode("utf-8"))
                            self.memo_retry = 0
                        else:
                            self.memo_retry = retry_after(end - p, plan.memo_step)
                    self.piece_memo = (known, starts, p, ids)
                    # The last finish's result began with the memo's first ``given_before`` ids
                    # (the memo only grows while it holds), and this one begins with all of them.
                    self.finish_stable = self.given_before
                    self.memo_given = len(ids)
                    return self._run_ids(text, p, end, ids)
        if n < self.piece_retry:
            return None
        self.piece_retry = retry_after(n, plan.memo_step)  # (unless a memo is made below)
        ends: list[int] = self.tok.pattern.split_ends(text)
        start: i64 = ends[len(ends) - 2] if len(ends) >= 2 else 0
        lead: i64 = len(text[start].encode("utf-8"))  # (the piece's first scalar: no cut before it)
        if self.cont and start == 0:
            start, lead = self.head, 0  # the long piece goes on from ids already sent
        if n - start < plan.interior_min_again:
            return None
        stop = n - 1
        data = text[start:stop].encode("utf-8")
        cut_bytes, ids = plan.growing_piece().final_prefix(data, lead)
        if cut_bytes == 0:
            return None
        head = self._ids_before(text, start)  # the pieces before the long one, as in the whole text
        head.extend(ids)
        p = start + len(data[:cut_bytes].decode("utf-8"))
        self.piece_memo = (text[:stop], [0] + ends[: len(ends) - 1], p, head)
        self.piece_memo_cont = cont_from
        self.piece_retry = 0
        self.memo_retry = 0
        self.memo_given = len(head)
        return self._run_ids(text, p, n, head)

    def _ids_before(self, text: str, start: i64) -> list[int]:
        """The ids of the pending ``text``'s pieces before ``start`` (a piece start), as ``_encode``
        gives them: with ``cont``, the first piece goes on from ids already sent, merged from its
        bytes (after a rule 3 cut, a long whitespace run or piece after it took the memos' paths
        only once that piece had ended: " \\n" * 1500 then spaces, 14-15x the time for 4x; a bug hunt)."""
        ids: list[int] = []
        if not self.cont:
            self.engine.encode_prefix(text, start, ids)
            return ids
        if start <= self.head:
            return ids
        plan = self.plan
        first: i64 = piece_end(text, 0, len(text), plan.stage2, plan.rules)
        ids = plan.merged(text[self.head : first])
        if first < start:
            self.engine.encode_prefix(text[first:], start - first, ids)
        return ids

    def _piece_stop(self, text: str, p: i64, to_newline: bool) -> i64:
        """Where the growing piece that goes on at ``p`` ends, at the end of ``text``."""
        if not to_newline:
            return len(text)
        newline = max(text.rfind("\n", p), text.rfind("\r", p))
        return newline + 1 if newline >= 0 else p

    def _run_ids(self, text: str, p: i64, end: i64, ids: list[int]) -> list[int]:
        """The memo's ids, the merge of the growing piece from ``p`` to ``end``, and the piece after."""
        out = ids + self.plan.merged(text[p:end]) if end > p else list(ids)
        if end < len(text):
            self.engine.encode_prefix(text[end:], len(text) - end, out)
        return out

    def _run_memo(self, text: str) -> tuple[str, str, list[int], i64, bool] | None:
        """A new memo for ``text`` (see _finish_run): the growing piece at its end, a prefix of it
        whose ids are final, and the characters the rest may hold; None if there is none."""
        plan = self.plan
        n: i64 = len(text)
        ends: list[int] = self.tok.pattern.split_ends(text)
        last: i64 = ends[len(ends) - 2] if len(ends) >= 2 else 0  # where the last piece starts
        spaces = plan.space_chars
        run = text[n - 1]
        to_newline = False
        if run in spaces:
            w: i64 = len(text.rstrip(spaces))  # where the whitespace run starts
            newline = max(text.rfind("\n", w), text.rfind("\r", w))
            start, stop, chars = last, n, spaces
            if plan.newline_cut:
                if newline >= 0 and (newline + 1 == n or last == newline + 1):
                    k = ends.index(newline + 1)
                    if newline + 1 - (ends[k - 1] if k else 0) >= plan.interior_min_again:
                        start, stop, to_newline = (ends[k - 1] if k else 0), newline + 1, True  # up to the last newline
                if not to_newline:
                    # The piece after the last newline: a newline would join it to the piece before.
                    chars = spaces.replace("\n", "").replace("\r", "")
                    if newline >= 0 and last != newline + 1:
                        return None
            if start < w:
                return None
        else:
            # A run of one character that the scanner reads in one loop: the piece goes on with it.
            start, stop, chars = last, n, run
            if text.count(run, start) != n - start or piece_end(text + run, start, n + 1, plan.stage2, plan.rules) != n + 1:
                return None
        lead: i64 = len(text[start].encode("utf-8"))  # (the piece's first scalar: no cut before it)
        if self.cont and start == 0:
            start, lead = self.head, 0  # the run's piece goes on from ids already sent
        if stop - start < plan.interior_min_again:
            return None
        data = text[start:stop].encode("utf-8")
        cut_bytes, ids = plan.growing_piece().final_prefix(data, lead)
        if cut_bytes == 0:
            return None
        head = self._ids_before(text, start)  # the pieces before the run's, as in the whole text
        head.extend(ids)
        p = start + len(data[:cut_bytes].decode("utf-8"))
        return (text[:p], chars, head, n, to_newline)

    def _finish_marks(self, raw: str) -> list[int] | None:
        """The ids of the pending text and ``raw`` at finish, when ``raw`` is a long NFC run of
        combining marks, without normalizing and merging all of it again at every call of a prompt
        session (``peek2.serving.marks_run``; None: encode it as usual)."""
        marks = self.marks_run
        if marks is None:
            marks = self.marks_run = MarksRun(self.plan, self.tok.pattern.split_ends)
        return marks.ids(self.text, raw, self.answer_to_session, self.head if self.cont else -1)

    def _raw_limit(self, raw: str, segments: list[tuple[int, int, int]]) -> int:
        """How much of ``raw`` later text cannot change (see peek2.serving.streaming).

        Never inside a match (``self.matches``), kept or discarded: the match uses up its text in
        the reference, so the text after a cut inside it would be searched again from there
        (``"  "`` single_word after "a" in ``"a   "``; ``" <y>"`` starting in the whitespace an
        rstrip ``"<x>"`` took, in ``"<x> <y> "``: both found by a bug hunt).

        The whitespace an ``rstrip`` token is taking at the end of ``raw`` is not held with the
        token (each feed searched and walked all of it again: quadratic, a bug hunt): where the
        token is the last match kept and the limit falls in its whitespace, the token is sent and
        the rest of ``raw`` goes on ``absorbed`` (``self.cut_run``): ``AddedTokenMatcher.spans``
        then starts as after that token, its whitespace ending at the first other character. The
        reference's scan is in the same state there: the last token stopped at the end of that run
        (``done``), no match starts between its content and the cut (none is kept after it; a
        discarded one, cut only at its start, searched the same from there), and what follows is
        matched leftmost from the cut as from the token.

        With an ``lstrip`` token the whitespace before the limit is held (the token may take it):
        walked back only over what the last walk did not see (``ws_memo``), so a long run fed a
        character at a time costs its length, not its square.
        """
        plan = self.plan
        n = len(raw)
        limit = n
        self.cut_run = False
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
                ws_from, ws_to = self.ws_memo
                k = limit
                while k > 0 and raw[k - 1] in WHITESPACE:
                    if ws_from < k <= ws_to:
                        k = ws_from  # walked last time (the character before it is not whitespace)
                        break
                    k -= 1
                if k < limit:
                    self.ws_memo = (k, limit)
                limit = k
        matches = self.matches
        if len(segments) == 1 and segments[0][2] < 0 and not plan.nfc and not plan.single_first and not matches:
            return limit  # one text segment, nothing else to respect (the usual chunk)
        # The rstrip token(s) whose whitespace reaches the end: where the last match kept ends, if
        # it is the last segment (-1: none; see above).
        run_from = -1
        if segments and segments[len(segments) - 1][1] == n and segments[len(segments) - 1][2] in plan.rstrip_ids:
            for k in range(len(matches) - 1, -1, -1):
                if matches[k][2] >= 0:  # (the last match kept)
                    if matches[k][2] == n:
                        run_from = matches[k][1]
                    break
        start = limit
        while True:
            moved = self._segment_limit(raw, segments, limit, run_from)
            if plan.single_first:
                # (at the end too: the next chunk may start with such a token)
                while 0 < moved and (moved == n or raw[moved] in plan.single_first) and _is_word_char(raw[moved - 1]):
                    moved -= 1
            if moved == limit:
                if 0 <= run_from <= limit:
                    # Sent whole there: the rstrip tokens that end at ``n`` (if they start before
                    # the limit), every other segment ending before it; else held as before.
                    self.cut_run = all(end <= limit or (token_id >= 0 and end == n and at <= limit) for at, end, token_id in segments)
                    if not self.cut_run:
                        run_from = -1
                        limit = start
                        continue
                return limit
            limit = moved

    def _segment_limit(self, raw: str, segments: list[tuple[int, int, int]], limit: int, run_from: int) -> int:
        """``limit`` moved back out of matches, matched tokens, an rstrip at the end (unless in
        the whitespace after ``run_from``, see _raw_limit), and NFC runs."""
        plan = self.plan
        n = len(raw)
        for found, match_end, _, _ in self.matches:
            if found < limit < match_end:
                limit = found  # never cut inside a match, kept or not (see _raw_limit)
        for at, end, token_id in segments:
            if token_id >= 0:
                if end == n and token_id in plan.rstrip_ids and 0 <= run_from <= limit:
                    pass  # in the whitespace after the last token kept: sent, the rest absorbed
                elif at < limit < end or (end == n and token_id in plan.rstrip_ids):
                    limit = min(limit, at)  # never inside a matched token; its whitespace absorption may go on
            elif plan.nfc and at < limit and (limit < end or limit == n):
                # Cut only before a character NFC cannot join to what precedes it; at the very end,
                # keep the last such run pending (a later combining mark or jamo may join it).
                sticky = STREAM_STICKY  # (generated: tables/nfc.py's stream_sticky says which and why)
                k = limit if limit < n else n - 1
                start = k
                memo_start, memo_k, memo_at = self.nfc_memo
                floor = memo_start if at == memo_at and at <= memo_start <= k else at
                while k > at and raw[k] in sticky and not _nfc_cut_before(raw, k, sticky):
                    if k == memo_start and at == memo_at:
                        k = memo_k  # walked last time, over the same raw text: keeps long runs linear
                        break
                    k -= 1
                    if k > floor:
                        k = min(k, _marks_from(raw, k, floor))  # (no cut before a mark: jumped over in C)
                self.nfc_memo = (start, k, at)
                limit = k
        return limit

    def _piece_cut(self) -> int:
        """The largest final piece boundary in the pending text (0 if none is known yet)."""
        text = self.text
        n = len(text)
        if n < 2:
            return 0
        plan = self.plan
        # Rule 1 needs only the pairs of characters it has not seen: where the pending text still
        # holds what the last search saw, that search's pairs had no boundary. (A stream fed a
        # character at a time searched the same 64 each time: a run of "a" or spaces, with no
        # boundary in it, 0.48-0.54x the time of tokenizers' one encode of the whole; a bug hunt.)
        low: i64 = 0
        checked_from = self.checked_from
        checked_to = self.checked_to
        if checked_to <= n and checked_to - checked_from == len(self.checked) and text[checked_from:checked_to] == self.checked:
            low = checked_to
        cut = final_boundary(text, plan.stage2, plan.rules, LOCAL_WINDOW, low)
        if cut:
            return cut
        checked_from = n - LOCAL_WINDOW if n > LOCAL_WINDOW else 0
        self.checked_from = checked_from
        self.checked_to = n
        self.checked = text[checked_from:n]
        if n < self.rescan_at:
            return 0
        self.rescan_at = 2 * n  # amortised: the scanner runs again only when the text has doubled
        ends: list[int] = self.tok.pattern.split_ends(text)
        trailing: i64 = -1  # where the whitespace run that ends the text starts (found at first need)
        for k in range(len(ends) - 1, -1, -1):
            end = ends[k]
            # Three characters seen after the end: a contraction may still join it (o200k's word
            # takes "'s" or "'ll" after it; GPT-2's "'" then "v" is "'ve" once an "e" follows: a
            # bug hunt found both sent as final with one or two characters seen).
            if end + CONTRACTION_CHARS > n:
                continue
            if not (text[end - 1] in WHITESPACE and text[end] in WHITESPACE):
                return end
            # Between two whitespace characters, the end moves while the run may grow, and is final
            # once a character that is not whitespace follows the run: \s+(?!\S) and \s*[\r\n]+
            # end on seeing it, and the piece after takes a space or not by its category. (Never
            # taken before: after a long whitespace run, "=" or CJK appended to a session stayed
            # pending whole, merged at every append, 14-18x the time for 4x; a bug hunt.)
            if trailing < 0:
                trailing = len(text.rstrip(plan.space_chars))
            if end < trailing:
                return end
        return 0
