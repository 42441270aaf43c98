"""Cutting a ``tokenizers.NormalizedString`` into peek2's pieces with few crossings into tokenizers.

The plugin (``peek2.plugin``) hands ``tokenizers`` one ``NormalizedString`` per piece, so that
offsets, word ids, ``pre_tokenize_str`` and training stay those of the original pipeline. What
it costs is how those objects are made; tokenizers' Python API offers three ways:

- ``normalized.slice((start, end))``: about 0.7 us. Most of it is not slicing: the argument
  is tried as an ``int`` first, and the failed attempt builds two Python exceptions before the
  tuple is accepted. It also walks the string from its start to find ``start``.
- ``normalized.slice(i)``: one character, about 0.1 us (an ``int`` is the first form tried).
- ``normalized.split(char, behavior)``: all the parts at once, made natively; one call.

So a node is cut by ``split`` on one character whenever every cut that split makes is a piece
boundary: a space with ``"merged_with_next"`` first (it alone cuts most text into its pieces:
the space that starts a piece is the only space-led boundary in these patterns), then the
characters on either side of the remaining cuts (``"isolated"``, ``"merged_with_previous"``,
``"merged_with_next"``). The parts that still hold several pieces are cut the same way,
recursively; what no character can cut is sliced, one character by ``int``.

Linear time: ``slice`` by character offsets walks from the start of the string, so texts longer
than ``CHUNK_CHARS`` are first cut in halves at piece boundaries, recursively (O(n log n) native
copying), and the halves are cut as above. Within a half, each split scans its node at most
``MAX_TRIES + 1`` times and splits nest at most ``MAX_DEPTH`` deep, so the work is at most a
constant times the half's length, whatever the text.

Performance notes (compiled, Llama-3.1, 5,000 XNLI dev sentences of all languages, 14.8 pieces
and 96 bytes a sentence; in-process medians):

- ``tok.encode`` per sentence: the original regex pipeline 23.4 us; this plugin slicing every
  piece by ``(start, end)`` (the previous design) 35.8 us; with these cuts 30.6 us.
- Cutting alone (no tokenizers pipeline): 16.0 us a sentence by ``(start, end)`` slices, 10.3 us
  here; splitting on spaces alone (wrong pieces, a bound) 5.0 us. 18.2 objects are made a
  sentence for 14.8 pieces; the rest is tokenizers making each ``NormalizedString`` (it copies
  the text and a byte alignment table), about 0.3-0.45 us an object on this text, and converting
  each back (``pretok.split`` clones every piece it receives): a floor the plugin cannot go under.
- Tried and not kept: trying every candidate character and taking the split with the most cuts
  (taking the first valid one tries fewer: 7.4 against 8.3 us on a 96-character English
  sentence); a ``bytearray`` of wanted cuts (indexing it is a generic call under
  mypyc; a merge walk over the sorted cuts replaced it: 11.3 -> 10.3 us).

Compiled with mypyc: the tokenizers objects are ``Any`` (this module does not import
tokenizers); the planning works on code points.
"""

from __future__ import annotations

from typing import Any, Final

CHUNK_CHARS: Final = 256
"""Nodes longer than this are halved (by ``(start, end)`` slices) before they are cut."""

MAX_TRIES: Final = 6
"""Characters tried as a split (after the space) for one node, before slicing it."""

MAX_DEPTH: Final = 4
"""Splits nested deeper than this are not tried: the node is sliced (bounds the work a character)."""

HALVE_MIN: Final = 4
"""A node that no character can cut is halved when it holds at least this many cuts, else sliced."""

_SPACE: Final = 32

# The split behaviours, in tokenizers' names.
_MERGED_WITH_NEXT: Final = "merged_with_next"
_MERGED_WITH_PREVIOUS: Final = "merged_with_previous"
_ISOLATED: Final = "isolated"


def cut_pieces(normalized: Any, text: str, ends: list[int]) -> list[Any]:
    """The pieces of ``normalized`` (a NormalizedString whose text is ``text``); piece k ends at ``ends[k]``."""
    out: list[Any] = []
    if ends:
        _halve(normalized, text, ends, 0, len(ends), 0, out)
    return out


def _halve(chunk: Any, text: str, ends: list[int], lo: int, hi: int, base: int, out: list[Any]) -> None:
    """Append pieces ``lo..hi-1`` of ``chunk``, which starts at character ``base`` of ``text``."""
    stop = ends[hi - 1]
    if hi - lo == 1:
        out.append(chunk)  # the chunk is exactly one piece
        return
    if stop - base <= CHUNK_CHARS:
        cuts = [ends[k] - base for k in range(lo, hi - 1)]
        _cut(chunk, text[base:stop], cuts, 0, True, out)
        return
    # Cut at the piece boundary nearest the middle character (at least one piece each side).
    middle = (base + stop) // 2
    a = lo
    b = hi - 1
    while a < b:  # the first k in [lo, hi-1) with ends[k] >= middle, or hi - 1
        m = (a + b) // 2
        if ends[m] < middle:
            a = m + 1
        else:
            b = m
    mid = min(max(a + 1, lo + 1), hi - 1)
    cut = ends[mid - 1]
    left = chunk.slice((0, cut - base))
    right = chunk.slice((cut - base, stop - base))
    if left is None or right is None:
        raise RuntimeError(f"tokenizers could not slice a NormalizedString of {stop - base} characters at {cut - base}")
    _halve(left, text, ends, lo, mid, base, out)
    _halve(right, text, ends, mid, hi, cut, out)


def _cut(node: Any, text: str, cuts: list[int], depth: int, try_space: bool, out: list[Any]) -> None:
    """Append the pieces of ``node`` (text ``text``), cut at ``cuts`` (sorted, inside the text)."""
    if not cuts:
        out.append(node)
        return
    if depth >= MAX_DEPTH:
        _slice(node, text, cuts, out)
        return
    size = len(text)
    # The first character whose split makes only wanted cuts: its parts are cut further, and are
    # short (going on to find the split with the most cuts cost more than it saved: see notes).
    best_char = -1
    best_behavior = ""
    best_count = 0
    tried: list[int] = [] if try_space else [_SPACE]
    k = -1 if try_space else 0
    while best_count == 0 and k < len(cuts) and len(tried) <= MAX_TRIES:
        if k < 0:
            candidates = [_SPACE]
        else:
            c = cuts[k]
            candidates = [ord(text[c]), ord(text[c - 1])]
        k += 1
        for ch in candidates:
            if best_count > 0 or ch in tried:
                continue
            tried.append(ch)
            behavior, count = _char_cuts(text, ch, cuts)
            if count > 0:
                best_char, best_behavior, best_count = ch, behavior, count
    if best_count == 0:
        if len(cuts) < HALVE_MIN:
            _slice(node, text, cuts, out)
            return
        # No character cuts the whole node (code: runs of spaces): halve it and try each half.
        k = len(cuts) // 2
        middle = cuts[k]
        left = node.slice((0, middle))
        right = node.slice((middle, size))
        if left is None or right is None:
            raise RuntimeError(f"tokenizers could not slice {text!r} at {middle}")
        _cut(left, text[:middle], cuts[:k], depth, True, out)
        _cut(right, text[middle:], [c - middle for c in cuts[k + 1 :]], depth, True, out)
        return
    parts = node.split(chr(best_char), best_behavior)
    if len(parts) != best_count + 1:
        raise RuntimeError(
            f"tokenizers split {text!r} on {chr(best_char)!r} ({best_behavior}) into {len(parts)} parts, "
            f"not the {best_count + 1} expected"
        )
    # The parts' bounds are the chosen character's cuts; the other cuts go to the part they fall in.
    ch = best_char
    start = 0
    i = 0
    n_cuts = len(cuts)
    for part in parts:
        end = _next_cut(text, ch, best_behavior, start, size)
        inner: list[int] = []
        while i < n_cuts and cuts[i] < end:
            inner.append(cuts[i] - start)
            i += 1
        if i < n_cuts and cuts[i] == end:
            i += 1
        if inner:
            _cut(part, text[start:end], inner, depth + 1, ch != _SPACE, out)
        else:
            out.append(part)
        start = end


def _char_cuts(text: str, ch: int, cuts: list[int]) -> tuple[str, int]:
    """The best behaviour for splitting ``text`` on ``ch`` making only cuts in ``cuts``, and its cut count (0: none)."""
    size = len(text)
    n_cuts = len(cuts)
    next_ok = True  # merged_with_next cuts before each ch (except at 0)
    previous_ok = True  # merged_with_previous cuts after each ch (except at the end)
    n_next = 0
    n_previous = 0
    n_both = 0
    last_after = -1
    j = 0  # cuts[j] is the first cut >= the position being checked (positions only grow)
    for p in range(size):
        if ord(text[p]) != ch:
            continue
        if p > 0:
            n_next += 1
            while j < n_cuts and cuts[j] < p:
                j += 1
            if j == n_cuts or cuts[j] != p:
                next_ok = False
            if p != last_after:
                n_both += 1
        if p + 1 < size:
            n_previous += 1
            n_both += 1
            while j < n_cuts and cuts[j] <= p:
                j += 1
            if j == n_cuts or cuts[j] != p + 1:
                previous_ok = False
        last_after = p + 1
        if not next_ok and not previous_ok:
            return "", 0
    if next_ok and previous_ok and n_both > 0:
        return _ISOLATED, n_both
    if next_ok and n_next >= n_previous and n_next > 0:
        return _MERGED_WITH_NEXT, n_next
    if previous_ok and n_previous > 0:
        return _MERGED_WITH_PREVIOUS, n_previous
    if next_ok and n_next > 0:
        return _MERGED_WITH_NEXT, n_next
    return "", 0


def _next_cut(text: str, ch: int, behavior: str, start: int, size: int) -> int:
    """Where the part that starts at ``start`` ends, for a split of ``text`` on ``ch`` with ``behavior``."""
    p = start
    if behavior == _MERGED_WITH_NEXT:
        p += 1  # a part starts with ch: its end is the next ch
        while p < size and ord(text[p]) != ch:
            p += 1
        return p
    if behavior == _MERGED_WITH_PREVIOUS:
        while p < size and ord(text[p]) != ch:
            p += 1
        return min(p + 1, size)
    # isolated: a part is one ch, or the run up to the next ch
    if ord(text[p]) == ch:
        return p + 1
    while p < size and ord(text[p]) != ch:
        p += 1
    return p


def _slice(node: Any, text: str, cuts: list[int], out: list[Any]) -> None:
    """Append the pieces of ``node`` one slice each: one character by index (the cheap form), more by range."""
    start = 0
    for end in [*cuts, len(text)]:
        piece = node.slice(start) if end - start == 1 else node.slice((start, end))
        if piece is None:
            raise RuntimeError(f"tokenizers could not slice {text!r} at ({start}, {end})")
        out.append(piece)
        start = end
