"""``finish`` of a long NFC run of combining marks of several classes, without normalizing and
merging the whole run again at every append of a prompt session (issue 23, item 3).

With an NFC normalizer (Qwen), ``"e" + "\\u0301\\u0323" * n`` stays one run that NFC may still
change anywhere: canonical ordering puts every U+0323 (class 220) before every U+0301 (class 230),
so each mark appended lands in the middle of the normalized text, and the stream holds the run raw
until it ends (``peek2.serving.streaming``). A prompt session answers after every append with the
``finish`` of a copy of its stream, which normalized the whole run (a stable sort of its marks, in
Python) and merged its whole piece: 20K characters appended 1K at a time took 0.16 s, 80K 1.97 s.

Three facts keep most of that work from one append to the next:

1. **NFC of a starter followed by marks** (combining class above 0, decomposing into marks only)
   is the starter composed with some of the first marks, then, class by class in increasing order,
   the marks of that class in the order they came, less those composed. Only the first ``HEADS``
   marks of a class can compose: a mark that follows a kept mark of its own class is blocked, and
   no composite absorbs ``HEADS`` marks (tests/test_marks_run.py checks every code point). So the
   normalized run is ``nfc(starter + heads)`` (the first ``HEADS`` marks of each class), with the
   rest of each class put after its kept heads; while one head of each longer class is kept, which
   is checked. Each class's marks only grow at their end.
2. **The marks are one piece**: they are one scanner category, which the scanner reads in one loop
   whatever its length (as rule 3 of the stream relies on), so the pieces are those of the text
   with two marks and with five, which must agree.
3. **Each class's ids are its own from a point no text before it moves.** Where no token of the
   vocabulary holds the last scalar of one class's marks followed by the first byte of the next's,
   or begins inside that scalar and goes on with that byte (checked per pair, remembered), no
   merge crosses between them: merges on either side of a boundary no token crosses happen in the
   same order as alone (the argument of ``peek2.bpe.growing_piece``), so that point is the start
   of the class's string. Where a token may cross (Thai: ``"\\u0e39\\u0e49"`` is one token),
   ``GrowingPiece.stable_start`` finds a boundary of the class's first tokens that stays a boundary
   whatever precedes them; the end of the previous class that is not final and the marks before
   that boundary are merged together at each finish. From that point on, each class's string grows
   at its end, so ``GrowingPiece.final_prefix`` finds a prefix of its ids that no longer string
   changes; it is kept, and only the rest is merged at the next finish (as
   ``StreamEngine._finish_run`` does for a run of one character).

Anything else (a class-0 scalar inside the run, a scalar the reference's Unicode 9 does not know,
marks of two scanner categories, no stable start found) returns None, and the stream normalizes
and encodes the run as usual. Such a run is still encoded whole at each finish; a failed try waits
until the run has doubled. The run may follow the rest of a piece that rule 3 cut (the stream's
``cont``): the ids before the marks' piece are then that rest merged from its bytes (``cont_from``).

Performance notes: the answer keeps what the last one gave of the pieces before the marks and
of the first class's final prefix (``same_ids``, the stream's ``finish_stable``): with marks of
one class, the ``new`` of a ``PromptSession.append`` is what changed at the run's end (Qwen3,
``"e" + "\u0301" * n`` in 100-character appends: 331,920 and 5,167,680 ids in all for 8K and 32K
marks before, 86,340 and 348,780 after). With several classes, each append changes the middle of
the run's ids (a mark of a lower class goes before every later one), so ``new`` holds the ids from
there to the end, which no ``(keep, new)`` answer can avoid (256K marks of two classes: 492M ->
169M ids sent); the engine hands its list over without a copy (``StreamEngine._advance``).

Then what each append copied: a new list of the whole run's ids (and the last one freed), each
class's marks, the run's part and its normalized strings, and the stream's raw text, which this
memo held too, so that the stream's append to it could not be made in place. Now an answer to a
session is its last one grown in place from the ids both share (``last``); the memo keeps a raw
string of its own, grown in place (``_keep``); each class's marks are kept in parts and joined
only where the layout is computed again; a run of one class whose heads are fixed keeps only the
rest of its part that is not final (``_Steady``); and an append whose distinct scalars each
decompose to themselves is filed by class with C calls (``_extend_simple``). What an append of
100 marks allocates in the middle of a run of 200,000: 390 KB -> under 50 KB. CPU time of the
session above, best of 3, against tokenizers' one encode of the whole text in the same process:
64K marks 0.105 -> 0.035 s (0.037), 256K 0.79 -> 0.165 s (0.21), where it was 1.01 s before the
answers kept their first ids. Per append there remain the Python work on the appended marks, the
merge of the unfinished rest (below ``StreamPlan.interior_min_again`` characters, plus one append) and
one C comparison of the raw run with the memo's. Two classes go through the whole layout at each
append: 1.68 -> 1.13-1.26 s at 256K marks (tokenizers 0.23-0.27 s), bound by the size of the
answers. (This memo's first step, against normalizing and merging the whole run at every append:
``"e" + "\\u0301\\u0323" * (n // 2)`` appended 1K characters at a time, 20K characters 0.157 ->
0.016 s (tokenizers 0.009), 80K 1.97 -> 0.075 s (0.043); ``python scripts/bench_growing_session.py``
gives the table.) A session's cut of a long piece before the run (3,000 spaces, then
``"e" + "\u0301\u0323" * 80_000`` in 100-character appends) sent the run down the whole path at every
append: 31.5 s, 0.77 s with ``cont_from``. The unfinished rest is cut at ``interior_min_again``
(256 characters with Qwen) and its merge, for a run of one mark, remembered by the plan
(``StreamPlan.merged``): one mark appended at a time, 53 -> 8.6 us an append.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Final

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2.bpe.growing_piece import retry_after
from peek2.normalize.nfc import nfc
from peek2.normalize.nfc_late import LATE
from peek2.pretokenize.scanner import category

if TYPE_CHECKING:
    from peek2.serving.stream_engine import StreamPlan

HEADS: Final = 4
"""Marks of one class that may compose with the starter (a composite holds at most 3 marks)."""

_SCANNED: Final = (2, 5)
"""Lengths of the marks with which the pieces are computed (rule 2 above: they must agree)."""


class _Part:
    """The ids of a prefix of one class's string that no longer string changes."""

    __slots__ = ("text", "ids", "retry")

    def __init__(self) -> None:
        self.text = ""  # the prefix whose ids are final
        self.ids: list[int] = []
        self.retry = 0  # length of the string below which no cut is tried again


class _Steady:
    """A run of one class, its layout fixed: what its next answer needs (``MarksRun._steady_ids``)."""

    __slots__ = ("before", "ccc", "head_ids", "memo", "rest", "length")

    def __init__(self, before: str, ccc: int, head_ids: list[int], memo: _Part, rest: str, length: int) -> None:
        self.before: Final = before  # the pending text before the run (the same pieces before it)
        self.ccc: Final = ccc  # the class of every mark
        self.head_ids: Final = head_ids  # the ids of the pieces before the marks' piece
        self.memo: Final = memo  # the part's final prefix: its ids (its text is not kept)
        self.rest = rest  # the part after that prefix
        self.length = length  # the part's length


class MarksRun:
    """What ``finish`` remembers of a pending NFC run of marks (one per stream, kept across restores)."""

    def __init__(self, plan: StreamPlan, split_ends: Callable[[str], list[int]]) -> None:
        self.plan: Final = plan
        self.split_ends: Final = split_ends  # the tokenizer's pattern: the ends of the pieces of a text
        # The raw run the classes below were made from ("" : none): a string of its own, grown in
        # place (``_keep``). Holding the stream's made every feed of the stream copy its raw text
        # (a str it appends to is resized in place only while nothing else holds it).
        self.raw = ""
        self.starter = ""  # the first scalar of the starter's decomposition ("" when the run starts with a mark)
        self.classes: dict[int, list[str]] = {}  # combining class -> its marks, in the order they came (in parts: ``_marks``)
        self.filed: dict[int, str] = {}  # the marks the last ``_extend`` filed, by class
        self.kind = -1  # the scanner category of every mark
        # The start and length of a raw run found of another form (not tried again before it
        # doubles; a start, not the run, for the same reason as ``raw``).
        self.failed = ("", 0)
        self.marks: dict[str, str | None] = {}  # scalar -> its decomposition into marks (None: not only marks)
        self.simple: dict[str, tuple[int, int]] = {}  # a mark that decomposes to itself -> (its class, its category)
        # The pieces before the marks: (text before the run, composed starter, start of the marks' piece, ids before it).
        self.pieces: tuple[str, str, int, list[int]] | None = None
        self.parts: list[_Part] = []
        self.stable: dict[str, int] = {}  # the first characters of a part -> its stable start (-1: none)
        self.answered = 0  # finishes answered this way (for tests and monitoring)
        self.cont_from = -1  # the last call's (see ids)
        # How many first ids of the last answer are those of the answer before it: the ids of the
        # pieces before the marks (the same ``pieces``) and the first part's final prefix as it
        # was (``_Part.ids`` only grows while its text is kept). The stream passes it on as its
        # ``finish_stable`` when its last finish was that answer, so that a prompt session's
        # ``new`` is what changed, not the whole run's ids at every append.
        self.same_ids = 0
        # The last answer, when it went to a prompt session (``StreamEngine.finish_copy``), which
        # keeps it unchanged as its tail: the next answer to a session grows it in place from its
        # ``same_ids`` rather than copying them, and freeing the old list (both were quadratic:
        # 256K marks of one class appended 100 at a time, two thirds of the session's time).
        self.last: list[int] | None = None
        # One class of marks after the pieces before them, at least ``HEADS`` + 1 of them: the
        # run's part only grows at its end, so that an answer needs only its unfinished rest.
        self.steady: _Steady | None = None

    def ids(self, before: str, raw: str, to_session: bool = False, cont_from: int = -1) -> list[int] | None:
        """The ids of ``before + nfc(raw)`` (``before``: the pending normalized text, from a piece
        boundary), or None when the run is not of the form above. ``to_session``: the answer goes
        to a prompt session (it may be the last answer's list, grown in place). ``cont_from``: -1,
        or ``before``'s first piece goes on from ids already sent (the stream's ``cont``), and is
        merged from its bytes from there (its first ``cont_from`` characters were sent)."""
        last, self.last = self.last, None
        if cont_from != self.cont_from:
            self.cont_from = cont_from
            self.pieces = self.steady = None  # (their ids before the marks counted the other way)
        start, length = self.failed
        if length and length <= len(raw) < 2 * length and raw.startswith(start):
            return None
        ids = self._ids(before, raw, last if to_session else None)
        if to_session:
            self.last = ids
        if ids is None:
            self.failed, self.raw = (raw[:64], len(raw)), ""  # tried again when the run has doubled
        else:
            self.answered += 1
        return ids

    def _ids(self, before: str, raw: str, last: list[int] | None) -> list[int] | None:
        steady, self.steady = self.steady, None
        extended = bool(self.raw) and raw.startswith(self.raw) and self._extend(raw[len(self.raw) :])
        filed = self.filed
        if extended and steady is not None and steady.before == before and (not filed or (len(filed) == 1 and steady.ccc in filed)):
            self._keep(raw, True)
            self.steady = steady
            return self._steady_ids(steady, filed.get(steady.ccc, ""), last)
        if steady is not None:
            self.parts = []  # (their texts were not kept while steady)
        if not extended and not self._start(raw):
            return None
        self._keep(raw, extended)
        self.same_ids = 0
        layout = self._normalized()
        if layout is None:
            return None
        starter, strings = layout
        known = self.pieces
        pieces = self._pieces(before, starter, strings)
        if pieces is None:
            return None
        q, head_ids = pieces
        parts = [(before + starter)[q:] + strings[0], *strings[1:]]
        starts = self._starts(parts)
        if starts is None:
            return None
        while len(self.parts) < len(parts):
            self.parts.append(_Part())
        given = 0  # ids of the first part's final prefix that ``last`` holds already
        if known is not None and self.pieces is known:  # (the same head ids as the last answer's)
            first = self.parts[0]
            self.same_ids = len(head_ids) + (len(first.ids) if parts[0].startswith(first.text) else 0)
            if last is not None and len(last) >= self.same_ids:
                given = self.same_ids - len(head_ids)
        grow = last if given else None  # (the answer: ``last`` grown by ``ids``)
        ids = [] if given else list(head_ids)
        engine = self.plan.tok_engine
        carried = ""  # the end of the previous part whose ids are not final, merged with what follows
        for part, start, memo in zip(parts, starts, self.parts):
            if start:
                carried += part[:start]
                part = part[start:]
            if carried:
                ids += engine.merge(carried.encode("utf-8"))
            carried = self._final(part, memo, ids, given)
            given = 0
        if len(parts) == 1 and len(self.classes) == 1:
            for ccc, marks in self.classes.items():
                if sum(map(len, marks)) > HEADS:  # (its heads, and so the layout, stay as they are)
                    self.steady = _Steady(before, ccc, head_ids, self.parts[0], carried, len(parts[0]))
        if carried:
            ids += engine.merge(carried.encode("utf-8"))
        if grow is not None:  # (changed here, with nothing left to fail)
            del grow[self.same_ids :]
            grow += ids
            return grow
        return ids

    def _keep(self, raw: str, extended: bool) -> None:
        """Keep ``raw`` (``extended``: it starts with the run kept) in a string of this object's own."""
        if extended:
            own = self.raw
            self.raw = ""
            own += raw[len(own) :]  # (in place: ``own`` is the only reference)
            self.raw = own
        else:
            self.raw = raw[:1] + raw[1:]  # (a new string, equal to ``raw``)

    def _steady_ids(self, steady: _Steady, added: str, last: list[int] | None) -> list[int]:
        """``_ids`` of the steady run grown by ``added``: ``_final`` of its part, from its rest."""
        plan = self.plan
        memo = steady.memo
        given = len(memo.ids)
        self.same_ids = len(steady.head_ids) + given
        rest = steady.rest + added
        steady.length += len(added)
        if len(rest) >= plan.interior_min_again and steady.length >= memo.retry:
            data = rest.encode("utf-8")
            cut_bytes, more = plan.growing_piece().final_prefix(data, 0)
            if cut_bytes:
                memo.ids += more
                rest = rest[len(data[:cut_bytes].decode("utf-8")) :]
            else:
                memo.retry = retry_after(steady.length, plan.memo_step)
        steady.rest = rest
        merged = plan.merged(rest) if rest else []
        if last is not None and len(last) >= self.same_ids:
            del last[self.same_ids :]
            last += memo.ids[given:]
            last += merged
            return last
        ids = steady.head_ids + memo.ids
        ids += merged
        return ids

    def _start(self, raw: str) -> bool:
        self.raw, self.classes, self.kind, self.starter = "", {}, -1, ""
        self.pieces = None
        first = raw[0]
        if not unicodedata2.combining(first):
            if first in LATE:
                return False
            parts = str(unicodedata2.normalize("NFD", first))
            if unicodedata2.combining(parts[0]) or parts[0] in LATE:
                return False
            self.starter = parts[0]
            raw = parts[1:] + raw[1:]  # (the starter's own marks come first)
        return self._extend(raw)

    def _extend(self, added: str) -> bool:
        """Files the marks of ``added`` by class; False when a scalar is not such a mark."""
        filed = self._extend_simple(added)
        if filed >= 0:
            return filed > 0
        new: dict[int, list[str]] = {}
        for char in added:
            decomposed = self._decomposition(char)
            if decomposed is None or not self._add(decomposed, new):
                return False
        self._file({ccc: "".join(chars) for ccc, chars in new.items()})
        return True

    def _file(self, filed: dict[int, str]) -> None:
        """Add each class's new marks (kept in parts: joined only where ``_marks`` needs them)."""
        classes = self.classes
        for ccc, marks in filed.items():
            if ccc in classes:
                classes[ccc].append(marks)
            else:
                classes[ccc] = [marks]
        self.filed = filed

    def _marks(self, ccc: int) -> str:
        """The marks of a class, joined."""
        parts = self.classes[ccc]
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0]

    def _decomposition(self, char: str) -> str | None:
        """The marks ``char`` decomposes into; None if it is not only marks (remembered)."""
        decomposed = self.marks.get(char, "")
        if decomposed == "":
            decomposed = str(unicodedata2.normalize("NFD", char))
            if char in LATE or not all(unicodedata2.combining(c) and c not in LATE for c in decomposed):
                decomposed = None
            self.marks[char] = decomposed
        return decomposed

    def _extend_simple(self, added: str) -> int:
        """``_extend`` of text whose distinct scalars are each a mark that decomposes to itself
        (the usual run), by C calls on the whole text rather than a Python step per mark
        (``str.translate`` keeps one class's marks in their order): 1 filed, 0 not marks of the
        run, -1 another form (``_extend`` goes mark by mark)."""
        simple = self.simple
        by_class: dict[int, list[str]] = {}
        for char in set(added):
            known = simple.get(char)
            if known is None:
                decomposed = self._decomposition(char)
                if decomposed is None:
                    return 0
                if decomposed != char:
                    return -1
                known = simple[char] = (unicodedata2.combining(char), category(ord(char), self.plan.stage2))
            ccc, kind = known
            if self.kind != kind:
                if self.kind >= 0:
                    return 0
                self.kind = kind
            chars = by_class.get(ccc)
            if chars is None:
                by_class[ccc] = [char]
            else:
                chars.append(char)
        if len(by_class) == 1:
            self._file({ccc: added for ccc in by_class})
            return 1
        filed: dict[int, str] = {}
        for ccc in by_class:
            others = {ord(char): None for other, chars in by_class.items() if other != ccc for char in chars}
            filed[ccc] = added.translate(others)
        self._file(filed)
        return 1

    def _add(self, decomposed: str, new: dict[int, list[str]]) -> bool:
        stage2 = self.plan.stage2
        for char in decomposed:
            kind = category(ord(char), stage2)
            if self.kind != kind:
                if self.kind >= 0:
                    return False
                self.kind = kind
            ccc: int = unicodedata2.combining(char)
            chars = new.get(ccc)
            if chars is None:
                chars = new[ccc] = []
            chars.append(char)
        return True

    def _normalized(self) -> tuple[str, list[str]] | None:
        """(the composed starter, each class's marks less those composed) : ``nfc(raw)`` in parts (fact 1)."""
        order = sorted(self.classes)
        composed = str(nfc(self.starter + "".join(self._marks(ccc)[:HEADS] for ccc in order)))
        starter = composed[:1] if self.starter else ""
        kept: dict[int, str] = {}
        for char in composed[len(starter) :]:
            ccc = unicodedata2.combining(char)
            kept[ccc] = kept.get(ccc, "") + char
        if (starter and unicodedata2.combining(starter)) or "".join(kept.get(ccc, "") for ccc in order) != composed[len(starter) :]:
            return None
        strings: list[str] = []
        for ccc in order:
            marks = self._marks(ccc)
            if len(marks) > HEADS and ccc not in kept:
                return None  # every head composed: the next mark of the class might too
            string = kept.get(ccc, "") + marks[HEADS:]
            if string:
                strings.append(string)
        return (starter, strings) if strings else None

    def _pieces(self, before: str, starter: str, strings: list[str]) -> tuple[int, list[int]] | None:
        """Where the marks' piece starts (it runs to the end) and the ids before it (fact 2)."""
        known = self.pieces
        if known is not None and known[0] == before and known[1] == starter:
            return known[2], known[3]
        plan = self.plan
        split_ends = self.split_ends
        marks = "".join(string[:5] for string in strings)[:5]
        if len(marks) < 5:
            return None
        base = before + starter
        ends = [split_ends(base + marks[:k]) for k in _SCANNED]
        q = ends[0][len(ends[0]) - 2] if len(ends[0]) >= 2 else 0
        for k, found in zip(_SCANNED, ends):
            if found[:-1] != ends[0][:-1] or found[-1] != len(base) + k:
                return None
        if q > len(base):
            return None
        head_ids: list[int] = []
        cont_from = self.cont_from
        if cont_from < 0:
            plan.tok_engine.encode_prefix(base + marks, q, head_ids)
        elif q == 0:
            q = cont_from  # the marks' piece is the one that goes on: merged from there, with its part
        else:
            # The first piece goes on from ids already sent: merged from its bytes (as the stream's
            # ``_encode`` does after a rule 3 cut), and the pieces after it up to the marks' as usual.
            first: int = ends[0][0]
            if first <= cont_from:
                return None
            head_ids = plan.tok_engine.merge(base[cont_from:first].encode("utf-8"))
            if first < q:
                plan.tok_engine.encode_prefix(base[first:] + marks, q - first, head_ids)
        self.pieces = (before, starter, q, head_ids)
        return q, head_ids

    def _starts(self, parts: list[str]) -> list[int] | None:
        """Where each part's ids start to be its own (fact 3): 0 when no token can cross into it,
        else a boundary that no text before it moves (``GrowingPiece.stable_start``); None if none."""
        starts = [0]
        for left, right in zip(parts, parts[1:]):
            # A token across holds the first byte of ``right`` after all of ``left``'s last scalar,
            # or begins inside that scalar.
            last = left[-1].encode("utf-8")
            key = last + right[0].encode("utf-8")[:1]
            across = self.plan.crossings.get(key)
            if across is None:
                across = self._crosses(key, len(last))
                self.plan.crossings[key] = across
            if not across:
                starts.append(0)
                continue
            window = right[: self.plan.interior_min]
            start = self.stable.get(window)
            if start is None:
                data = window.encode("utf-8")
                j = self.plan.growing_piece().stable_start(data)
                start = len(data[:j].decode("utf-8")) if j > 0 else -1
                if len(self.stable) > 64:
                    self.stable.clear()
                self.stable[window] = start
            if start < 0:
                return None
            starts.append(start)
        return starts

    def _crosses(self, key: bytes, last: int) -> bool:
        """Whether a token holds ``key`` or starts with ``key[j:]`` for ``0 < j < last``."""
        plan = self.plan
        blob = plan.token_blob
        if not blob:
            # NUL before every token: a key without NUL (marks' UTF-8 has none) found in the blob is
            # inside one token, and one found after a NUL starts a token.
            blob = plan.token_blob = b"\0" + b"\0".join(plan.vocab)
        if b"\0" in key:
            return True
        return key in blob or any(b"\0" + key[j:] in blob for j in range(1, last))

    def _final(self, part: str, memo: _Part, out: list[int], given: int = 0) -> str:
        """The ids of the prefix of ``part`` that no longer string changes go to ``out`` (kept in
        ``memo`` from call to call; its first ``given`` ids are there already, ``memo`` kept);
        returns the rest, whose merge may still change."""
        plan = self.plan
        if not part.startswith(memo.text):
            memo.text, memo.ids, memo.retry = "", [], 0
        p = len(memo.text)
        if len(part) - p >= plan.interior_min_again and len(part) >= memo.retry:
            data = part[p:].encode("utf-8")
            cut_bytes, more = plan.growing_piece().final_prefix(data, 0)
            if cut_bytes:
                memo.ids += more
                p += len(data[:cut_bytes].decode("utf-8"))
                memo.text = part[:p]
            else:
                memo.retry = retry_after(len(part), plan.memo_step)
        out += memo.ids[given:] if given else memo.ids
        return part[p:]
