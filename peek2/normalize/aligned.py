"""NFC with the reference's alignment (the source character of each normalized one), for offsets.

Compiled with mypyc (the usual case of ``Tokenizer.encode_with_offsets`` on a normalizer's text).

NFC never reaches across a starter that nothing composes with across (``_BOUNDARY`` below; the
cuts of ``peek2.normalize.nfc``), and the reference's alignment of a stretch between two such cuts
depends on that stretch alone (each normalized character moves the source position on by one less
than its change, never below 0, and no change exceeds +1: a stretch consumes exactly its own
characters). So text is walked as clusters, a boundary starter and the characters up to the next:
a cluster NFC leaves alone is copied, a short one that it changes is looked up in a dict of the
clusters seen (``aligned_by_rules`` on a miss), and a long one of singleton marks (a run of
combining marks after one starter) follows from its length and its NFC's (``_marks_run``).

Performance notes (compiled, Qwen3, ``scripts/bench_offsets.py``-style medians of 5): the rules
character by character in Python cost about 5 us a character of a text NFC changes ("\u212b" *
100,000: 0.64 s, against 0.07 s for tokenizers' whole ``encode``); a cluster walk that looks
each cluster up costs a dict lookup and a slice per cluster, and nothing per character of a
cluster below U+0300 that starts and ends one (ASCII, Latin-1). The rules on a run of 4M marks
held a str and three list entries per mark (0.9 GB); ``_marks_run`` holds the source list only.
A run of marks longer than NFC's chunk is normalized once (the text's NFC hands it over,
``nfc_with_runs``) and its end found by ``re``; "e" + 200,000 marks with offsets went from
0.41-0.47x tokenizers' ``encode`` to 1.5-2.1x (one class), and from 0.49-0.51x to 0.99-1.06x (two
classes alternating; the sort is what remains). Marks whose decomposition is not themselves
(U+0344, U+0341, U+0F73) are no singleton marks, so a run of them went through the rules character
by character: ``"\u0344" * 100,000`` with offsets took 0.356 s against tokenizers' 0.105 s
(0.30x). Now NFC decomposes the run with one ``str.translate`` (``peek2.normalize.nfc.nfc_run``),
the run's NFC is handed to the rules, and the rules make the parts, their changes and their
classes with three ``str.translate`` calls and copy stretches of marks that compose with nothing
whole: 0.136 s (0.75x; U+0341 after "a" 0.31x -> 0.82x, U+0F73 0.41x -> 0.76x, U+0323 U+0340
after "a" 0.36x -> 0.62x). What remains is a list entry a part in the rules and the spans.
A bug hunt: 40,000 random CJK ideographs after one U+212B with offsets took 0.36x tokenizers'
time (random Hangul 0.30x): each character was a cluster looked up in ``_clusters``, which the
text's 8,000+ distinct characters emptied again and again, so each went through the rules. The
walk now passes stretches that hold no character of ``CHANGED_NEAR_CLASS`` with one ``re``
search: 1.25x (Hangul 1.27x); 3,000 distinct ideographs, where the memo held, 0.81x -> 1.25x.
Runs of marks out of order (``"\u0f73" * 100,000``, U+0F71 U+0F72 each: 200,000 marks of two
classes in turn) were sorted as lists, a str, an int and three list entries a mark, and read by
three ``str.translate`` calls (70-110 ns a character each): 1.0x tokenizers. The rules now read
the decomposition as one byte a kind of part (``_tagged``), and sort and read it off by
``bytes.translate`` (about 1 ns a byte); a cluster's alignment is no longer copied int by int
into the text's: ``aligned_by_rules`` of that run 75 -> 34 ms, ``nfc_aligned`` 112 -> 64 ms,
Qwen3's ``encode_with_offsets`` 1.03x -> 1.24x tokenizers' ``encode`` (best of 7, one process).
A cluster whose NFC is one character (a syllable from its jamo, a letter and the marks it
absorbs) is aligned to its start without the rules: 30,000 random jamo syllables (NFD Korean, as
macOS file names hold it), which keep missing the clusters' memo, 0.71x -> 1.11x tokenizers.
Other short clusters read each character's parts, changes and classes from a memo
(``_decomposed``, ``_part_classes``) instead of three ``str.translate`` calls with tables made per cluster: 7.1 ->
3.7 us a cluster of a letter and 2-6 random marks; 15,000 of them with offsets (15,000 distinct
clusters, more than the memo holds) 0.92-0.96x -> 1.22x tokenizers (``python
scripts/bench_hunt_cases.py --only offsets``). A bug hunt: new text each call, every cluster
missing the memo, went through the rules: zalgo (20,000 letters with 0-6 random marks) 0.73x, 6.5 us
a changed cluster; a letter and marks that are themselves now follow from the NFC's length
(``_marks_run``, as a long run does): 1.35x. Random syllables as jamo 0.60x, LV syllables and
trailing jamo 0.49x: Hangul alone is now aligned by Unicode's arithmetic (``_hangul_aligned``).
"""

from __future__ import annotations

import re
from typing import Callable, Final

from mypy_extensions import i64

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs

from peek2.normalize.nfc import CHUNK, nfc, nfc_run, nfc_with_runs, not_boundary_end
from peek2.normalize.nfc_late import CHANGED_NEAR_CLASS, LATE, NOT_BOUNDARIES

_BOUNDARY: Final = 1
"""A starter NFC may cut text before (combining class 0, or a LATE scalar, and not NOT_BOUNDARIES)."""
_MARK: Final = 2
"""A non-starter whose canonical decomposition is itself."""
_PLAIN_STARTER: Final = 4
"""A character whose canonical decomposition is itself, Hangul syllables aside."""
_ONE_MARK: Final = 8
"""A non-starter whose full canonical decomposition is one other non-starter (U+0340 -> U+0300):
to the rules a mark of change 0, as a ``_MARK``."""

_kinds: dict[str, int] = {}
_KINDS_KEPT: Final = 1 << 16
# cluster -> its NFC and alignment (() where unchanged): tuples of ints, which the garbage
# collector stops walking (the alignment lists kept the dict tracked: a full collection walked
# its 65,536 entries, caught by test_a_tokenizer_adds_nothing_large_for_the_garbage_collector_to_walk)
_clusters: dict[str, tuple[str, tuple[int, ...]]] = {}
_CLUSTER_MAX: Final = 32
"""Clusters of more characters are not kept (each is aligned on its own)."""
_CLUSTERS_KEPT: Final = 1 << 13
_CLASS_PASSES_MAX: Final = 8  # a run of marks of at most these many classes is ordered a pass a class
_TAGGED_MIN: Final = 64
"""Clusters of more characters are read as bytes of tags (``_tagged``; its tables cost a short
cluster 2-3 us: 15,000 short clusters out of order with offsets went from 1.18x tokenizers' time
to 0.51x)."""
_changed_near: list[Callable[[str, int], re.Match[str] | None]] = []  # (compiled on first use)


def nfc_aligned(text: str) -> tuple[str, list[int]]:
    """``nfc(text)`` and, for each of its characters, the index in ``text`` it is aligned to, as
    the reference aligns them (``aligned_by_rules``).

    >>> nfc_aligned("e\u0301 ok")
    ('é ok', [0, 2, 3, 4])
    """
    runs: dict[int, tuple[int, str]] = {}
    normalized = nfc_with_runs(text, runs)
    n: i64 = len(text)
    if normalized == text:
        return text, list(range(n))
    parts: list[str] = []
    source: list[int] = []
    copied: i64 = 0  # text[:copied] is in parts and source
    start: i64 = 0
    if not _changed_near:
        _changed_near.append(re.compile(f"[{CHANGED_NEAR_CLASS}]").search)
    find_changed_near = _changed_near[0]
    while start < n:
        # Clusters NFC leaves alone, up to the next character where it may change text, are
        # passed in C: that character starts a cluster, or ends the one of the character before
        # it (``start`` always begins one).
        near = find_changed_near(text, start)
        if near is None:
            break
        at: i64 = near.start()
        if at > start and not _kind(text[at]) & _BOUNDARY:
            at -= 1
        start = at
        end = _hangul_run_end(text, start, n)  # (whole Hangul clusters: aligned at once, below)
        if end == start:
            end = start + 1
            while end < n and (ord(text[end]) >= 0x300 and not _kind(text[end]) & _BOUNDARY):
                end += 1
                if end - start > _CLUSTER_MAX:  # (a long run of marks: its end found by re)
                    end = not_boundary_end(text, end)
                    break
        if end - start == 1 and ord(text[start]) < 0x300:
            start = end  # (NFC leaves a lone character below U+0300 as it is)
            continue
        hangul = _hangul_aligned(text, start, end) if 0x1100 <= ord(text[start]) <= 0xD7A3 else None
        cluster = text[start:end]
        if hangul is not None:
            changed, moves = hangul
            if changed == cluster:
                moves = []
        elif end - start <= _CLUSTER_MAX:
            kept = _clusters.get(cluster)
            if kept is None:
                # (a letter and marks that are themselves follows from the NFC's length, as a long
                # run does: the rules took 6.5 us a cluster, and new zalgo text each call with
                # offsets, every cluster missing this memo, ran at 0.73x tokenizers; a bug hunt)
                cluster_normalized, cluster_source = _marks_run(cluster, None)
                kept = (cluster_normalized, tuple(cluster_source))
                if len(_clusters) >= _CLUSTERS_KEPT:
                    _clusters.clear()
                _clusters[cluster] = kept
            changed, moves = kept[0], list(kept[1])
        else:
            run = runs.get(start)
            changed, moves = _marks_run(cluster, run[1] if run is not None and run[0] == end else None)
        if moves:
            if copied < start:
                parts.append(text[copied:start])
                source.extend(range(copied, start))
            parts.append(changed)
            if start == 0:  # (the int objects of the cluster's alignment, not new ones)
                source.extend(moves)
            else:
                for k in moves:
                    source.append(start + k)
            copied = end
            # The same cluster again, from a cut to a cut (it starts with a boundary starter and
            # the character after it is one, or the text ends): the same NFC and alignment, without
            # the walk's search and lookups. ("a\u0301" * 50,000 with offsets, one cluster after
            # another: 0.70-0.84x tokenizers; a bug hunt.)
            size: i64 = end - start
            if 1 < size <= _CLUSTER_MAX and _kind(text[start]) & _BOUNDARY:
                while text.startswith(cluster, end) and (end + size == n or _kind(text[end + size]) & _BOUNDARY):
                    parts.append(changed)
                    for k in moves:
                        source.append(end + k)
                    end += size
                copied = end
        start = end
    if copied < n:
        parts.append(text[copied:])
        source.extend(range(copied, n))
    result = "".join(parts)
    if result != normalized:  # (clusters cut where NFC may cut: their forms add up to the text's)
        raise AssertionError(f"NFC by clusters disagrees with NFC on {ascii(text)}")
    return result, source


def _kind(char: str) -> int:
    kind = _kinds.get(char)
    if kind is None:
        kind = 0
        mapping: str = unicodedata2.decomposition(char)
        singleton = char in LATE or not mapping or mapping.startswith("<")
        hangul = _HANGUL_S <= ord(char) < _HANGUL_S + _HANGUL_S_COUNT
        klass = _combining(char)
        if klass == 0 and char not in NOT_BOUNDARIES:
            kind |= _BOUNDARY
        if klass != 0 and singleton:
            kind |= _MARK
        elif klass != 0:
            parts = _decomposed(char)
            if len(parts) == 1 and _combining(parts) != 0:
                kind |= _ONE_MARK
        if singleton and not hangul:
            kind |= _PLAIN_STARTER
        if len(_kinds) >= _KINDS_KEPT:  # (a text of every code point: bounded)
            _kinds.clear()
        _kinds[char] = kind
    return kind


def _marks_run(cluster: str, known: str | None) -> tuple[str, list[int]]:
    """``aligned_by_rules(cluster)`` (``[]`` when unchanged) without a list per character, for a
    cluster of a plain starter and marks that decompose to one mark (themselves, or another as
    U+0340 to U+0300): each has change 0, the starter absorbs some and takes change -absorbed, so
    character 0 is aligned to 0 and character ``k`` to ``k + absorbed``. Any other cluster goes
    by the rules. ``known``: its NFC, where the text's NFC found it (else computed here).

    (Marks decomposing to another went by the rules: Qwen3's ``encode_with_offsets`` of ``"a" +
    "\u0323\u0340" * 50,000`` took 0.09 s, 0.67x tokenizers'; a bug hunt.)"""
    n: i64 = len(cluster)
    plain = n > 1 and bool(_kind(cluster[0]) & _PLAIN_STARTER)
    if plain:
        # the distinct marks (a str and a lookup per mark cost 0.1 us; a run of one mark is counted in C)
        marks = {cluster[1]} if cluster.count(cluster[1], 1) == n - 1 else set(cluster[1:])
        for mark in marks:
            if not _kind(mark) & (_MARK | _ONE_MARK):
                plain = False
                break
    if not plain:
        normalized, source = aligned_by_rules(cluster, known)
        return normalized, ([] if normalized == cluster else source)
    # (singleton marks are never LATE: a plain starter that is not LATE begins a stretch NFC may not cut)
    if known is not None:
        normalized = known
    else:
        # (one C call up to CHUNK scalars, as ``nfc`` itself: the run's sort in Python cost 20 us
        # a cluster of 33 marks of 14 classes, 1.5x tokenizers with offsets; a bug hunt)
        normalized = nfc(cluster) if cluster[0] in LATE or n <= CHUNK else nfc_run(cluster)
    if normalized == cluster:
        return cluster, []
    absorbed: i64 = n - len(normalized)
    source = [0]
    source.extend(range(1 + absorbed, n))
    return normalized, source


_HANGUL_S: Final = 0xAC00
_HANGUL_L: Final = 0x1100
_HANGUL_V: Final = 0x1161
_HANGUL_T: Final = 0x11A7
_HANGUL_V_COUNT: Final = 21
_HANGUL_T_COUNT: Final = 28
_HANGUL_N: Final = _HANGUL_V_COUNT * _HANGUL_T_COUNT
_HANGUL_S_COUNT: Final = 19 * _HANGUL_N
_compositions: dict[str, str] = {}  # pair -> composite, or "" for none
_COMPOSITIONS_KEPT: Final = 1 << 16


_hangul_runs: list[re.Pattern[str]] = []


def _hangul_run_end(text: str, start: i64, n: i64) -> i64:
    """The end of the run of whole Hangul clusters (jamo, syllables) from ``start``: ``start``
    where none starts there. A cluster the run's last character begins that goes on past it
    (a mark after a syllable) is left out of the run, so that it ends at a cut."""
    first: i64 = ord(text[start])
    if not (0x1100 <= first <= 0x11FF or _HANGUL_S <= first < _HANGUL_S + _HANGUL_S_COUNT):
        return start
    if not _hangul_runs:
        _hangul_runs.append(re.compile("[\u1100-\u11ff\uac00-\ud7a3]*"))
    found = _hangul_runs[0].match(text, start)
    end: i64 = start if found is None else found.end()
    if start < end < n and not _kind(text[end]) & _BOUNDARY:
        end -= 1
        while end > start and not _kind(text[end]) & _BOUNDARY:
            end -= 1
    return end


def _hangul_aligned(text: str, start: i64, end: i64) -> tuple[str, list[int]] | None:
    """NFC of ``text[start:end]`` and its alignment where it is Hangul alone (jamo, syllables),
    else None. NFC joins a leading and a vowel jamo, or an LV syllable, with the trailing jamo
    after it (Unicode's arithmetic); every jamo is its own decomposition, so each character of the
    result is aligned to the first character it came from (the rules' changes are never above 0).
    (Random syllables in jamo, LV syllables and trailing jamo, jamo in any order, with offsets:
    more distinct clusters than the memo keeps, each through the rules, 0.49-0.75x tokenizers; bug
    hunts.)"""
    chars: list[str] = []
    source: list[int] = []
    k: i64 = start
    while k < end:
        cp: i64 = ord(text[k])
        if not (0x1100 <= cp <= 0x11FF or _HANGUL_S <= cp < _HANGUL_S + _HANGUL_S_COUNT):
            return None
        following: i64 = ord(text[k + 1]) if k + 1 < end else 0
        if _HANGUL_L <= cp < _HANGUL_L + 19 and _HANGUL_V <= following < _HANGUL_V + _HANGUL_V_COUNT:
            syllable: i64 = _HANGUL_S + ((cp - _HANGUL_L) * _HANGUL_V_COUNT + following - _HANGUL_V) * _HANGUL_T_COUNT
            step: i64 = 2
        elif _HANGUL_S <= cp and (cp - _HANGUL_S) % _HANGUL_T_COUNT == 0:
            syllable = cp
            step = 1
        else:
            chars.append(text[k])
            source.append(k - start)
            k += 1
            continue
        trailing: i64 = ord(text[k + step]) if k + step < end else 0
        if _HANGUL_T < trailing < _HANGUL_T + _HANGUL_T_COUNT:  # (U+11A7 is no trailing jamo)
            syllable += trailing - _HANGUL_T
            step += 1
        chars.append(chr(syllable))
        source.append(k - start)
        k += step
    return "".join(chars), source


def aligned_by_rules(text: str, known: str | None = None) -> tuple[str, list[int]]:
    """``nfc(text)`` and, for each of its characters, the index in ``text`` it is aligned to.

    The reference's rules (its normalizer reports, per output character, how many characters
    it adds or removes, and the alignment is then read off by position, measured against it):
    the first part of a decomposition has change 0 and each further part +1; canonical
    reordering moves the changes with the characters; a composition keeps the starter's change
    and adds (change - 1) of each absorbed mark. Walking the output, a character with change
    <= 0 takes the next source index (a negative change then skips as many), and one with
    change > 0 repeats the previous one. So a mark moved past others is aligned by position,
    not to the character it came from, exactly like the reference.

    ``known``: ``nfc(text)``, where the caller has it (NFC of a long run of marks costs about as
    much as these rules).

    >>> aligned_by_rules("e\\u0301 ok")
    ('é ok', [0, 2, 3, 4])
    """
    normalized = nfc(text) if known is None else known
    if len(normalized) == 1:
        # One character (a starter that absorbed every mark, a Hangul syllable from its jamo):
        # the composite of the text's first part, of change 0 plus (change - 1) of each part
        # absorbed, never above 0, so step 4 aligns it to 0. (Random jamo with offsets, each
        # syllable a cluster through the rules, which 11,000 syllables keep missing the clusters'
        # memo: 0.71x tokenizers.)
        return normalized, [0]
    # 1. Full canonical decomposition: change 0 for a first part, +1 for each further part.
    tagged = _tagged(text, set(text)) if len(text) > _TAGGED_MIN else None
    if tagged is None:
        # (Each character's parts and classes kept (``_decomposed``, ``_part_classes``) and added up: three
        # str.translate calls with tables of the distinct characters cost a short cluster about
        # twice as much, and the clusters' memo keeps missing on random marks.)
        chars: list[str] = []
        changes: list[int] = []
        classes: list[int] = []
        for char in text:
            char_parts = _decomposed(char)
            chars.extend(char_parts)
            changes.append(0)
            for _ in range(1, len(char_parts)):
                changes.append(1)
            classes.extend(_part_classes(char))
        if "".join(chars) == normalized:
            return normalized, _read_off(changes)
    else:
        tags, tag_parts, tag_changes, tag_classes = tagged
        changes = list(tags.translate(tag_changes))
        chars = [tag_parts[tag] for tag in tags]
        if "".join(chars) == normalized:
            # Nothing to order (a stable sort by class that leaves the string as it is moved
            # nothing) and nothing composed: the changes are read off as they are. (A run of
            # marks that decompose into two, "\u0344" * 100,000: a str a character for steps 2
            # and 3 was half of Qwen3's encode_with_offsets, 1.0x tokenizers'.)
            return normalized, _read_off(changes)
        classes = list(tags.translate(tag_classes))
        ordered_tags = _ordered_runs(tags, classes, tag_classes)
        if ordered_tags is not None:
            changes = list(ordered_tags.translate(tag_changes))
            chars = [tag_parts[tag] for tag in ordered_tags]
            classes = list(ordered_tags.translate(tag_classes))
    # 2. Canonical ordering: a stable sort by combining class of each run of non-starters (a
    # run already in order, the usual one, is left as it is).
    count: i64 = len(chars)
    for start, end in _runs_out_of_order(classes):
        present = sorted(set(classes[start:end]))
        if len(present) <= _CLASS_PASSES_MAX:
            # (one pass a class: the sort of keys below was a third of the rules' time on a
            # run of two classes in turn, "a" + "\u0323\u0340" * 50,000)
            order = [k for klass in present for k in range(start, end) if classes[k] == klass]
        else:
            # (keys of class and position: one sort of ints, stable by the position)
            keys = [classes[k] << 32 | k for k in range(start, end)]
            keys.sort()
            order = [key & 0xFFFFFFFF for key in keys]
        chars[start:end] = [chars[k] for k in order]
        changes[start:end] = [changes[k] for k in order]
        classes[start:end] = [classes[k] for k in order]
    # 3. Canonical composition with the last starter, unless blocked.
    out_chars: list[str] = []
    out_changes: list[int] = []
    out_classes: list[int] = []
    starter: i64 = -1  # index in out_* of the last starter
    k: i64 = 0
    while k < count:
        char = chars[k]
        change = changes[k]
        klass = classes[k]
        if starter >= 0:
            between = len(out_chars) - 1 > starter
            blocked = between and (out_classes[-1] == 0 or out_classes[-1] >= klass)
            if not blocked:
                composite = _compose(out_chars[starter], char)
                if composite is not None:
                    out_chars[starter] = composite
                    out_changes[starter] += change - 1
                    k += 1
                    continue
        # A stretch of marks that compose with nothing here (no starter yet, or each blocked by
        # the one before it: of the same or a lower class) is copied at once.
        stop = k + 1
        if klass != 0 and (starter < 0 or len(out_chars) > starter):
            while stop < count and classes[stop] != 0 and (starter < 0 or classes[stop] <= classes[stop - 1]):
                stop += 1
        if stop == k + 1:
            out_chars.append(char)
            out_changes.append(change)
            out_classes.append(klass)
        else:
            out_chars.extend(chars[k:stop])
            out_changes.extend(changes[k:stop])
            out_classes.extend(classes[k:stop])
        if klass == 0:
            starter = len(out_chars) - 1
        k = stop
    result = "".join(out_chars)
    if result != normalized:  # the rules above must agree with the normalizer itself
        raise AssertionError(f"NFC alignment disagrees with NFC on {ascii(text)}")
    return result, _read_off(out_changes)


def _runs_out_of_order(classes: list[int]) -> list[tuple[int, int]]:
    """The runs of non-starters (nonzero classes) not in canonical order, as (start, end)."""
    runs: list[tuple[int, int]] = []
    count: i64 = len(classes)
    start: i64 = 0
    while start < count:
        if classes[start] == 0:
            start += 1
            continue
        end = start + 1
        ordered = True
        while end < count and classes[end] != 0:
            if classes[end] < classes[end - 1]:
                ordered = False
            end += 1
        if not ordered:
            runs.append((start, end))
        start = end
    return runs


def _tagged(text: str, distinct: set[str]) -> tuple[bytes, list[str], bytes, bytes] | None:
    """The canonical decomposition of ``text`` as one byte a part, a tag that stands for the part
    and its change (0 for the first part of a character, else 1); the part of each tag, and the
    change and class of each as ``bytes.translate`` tables. None where the text has more than 256
    kinds of part.

    Bytes, so that the classes and changes are read off, and runs of marks sorted, by
    ``bytes.translate`` at about a nanosecond a part (``str.translate`` costs 70-110 ns a
    character: it makes an int and looks it up in a dict for each). The decomposition itself is
    one ``str.translate`` of the text (of its distinct characters to their tags)."""
    tag_of: dict[tuple[str, int], int] = {}
    tag_parts: list[str] = []
    tag_changes: list[int] = []
    tag_classes: list[int] = []
    tags_of: dict[int, str] = {}
    for char in distinct:
        parts = _decomposed(char)
        tags: list[str] = []
        for k in range(len(parts)):
            change = 0 if k == 0 else 1
            key = (parts[k], change)
            tag = tag_of.get(key, -1)
            if tag < 0:
                tag = len(tag_parts)
                if tag >= 256:
                    return None
                tag_of[key] = tag
                tag_parts.append(parts[k])
                tag_changes.append(change)
                tag_classes.append(_combining(parts[k]))
            tags.append(chr(tag))
        tags_of[ord(char)] = "".join(tags)
    unused = [0] * (256 - len(tag_parts))
    return text.translate(tags_of).encode("latin-1"), tag_parts, bytes(tag_changes + unused), bytes(tag_classes + unused)


def _ordered_runs(tags: bytes, classes: list[int], tag_classes: bytes) -> bytes | None:
    """``tags`` (``_tagged``) with each run of non-starters that is out of order and holds at most
    ``_CLASS_PASSES_MAX`` classes sorted by class, stably, as canonical ordering sorts it: one
    ``bytes.translate`` a class keeps the run's tags of that class in order and drops the others.
    None if no run was sorted (runs of more classes are left to the caller's sort).

    (Sorted as lists, a str, an int and three list entries a part, the sort cost most of Qwen3's
    ``encode_with_offsets`` of ``"\u0f73" * 100,000``, 1.0x tokenizers'.)"""
    pieces: list[bytes] = []
    copied: i64 = 0
    dropped: dict[int, bytes] = {}  # class -> the tags of every other class
    for start, end in _runs_out_of_order(classes):
        present = sorted(set(classes[start:end]))
        if len(present) <= _CLASS_PASSES_MAX:
            run = tags[start:end]
            pieces.append(tags[copied:start])
            for klass in present:
                others = dropped.get(klass)
                if others is None:
                    others = bytes([tag for tag in range(256) if tag_classes[tag] != klass])
                    dropped[klass] = others
                pieces.append(run.translate(None, others))
            copied = end
    if not pieces:
        return None
    pieces.append(tags[copied:])
    return b"".join(pieces)


def _read_off(changes: list[int]) -> list[int]:
    """4. The alignment read off by position from the output's changes (see aligned_by_rules)."""
    source: list[int] = []
    consumed: i64 = 0
    for change in changes:
        if change > 0:
            source.append(consumed - 1)
        else:
            source.append(consumed)
            consumed += 1 - change
    return source


_decompositions: dict[str, str] = {}
_DECOMPOSITIONS_KEPT: Final = 1 << 16


_classes_of_parts: dict[str, bytes] = {}  # (bytes, not tuples: a dict of atomic values the garbage collector does not walk)


def _part_classes(char: str) -> bytes:
    """The combining classes of the parts of ``char``'s full canonical decomposition, kept."""
    kept = _classes_of_parts.get(char)
    if kept is None:
        kept = bytes([_combining(part) for part in _decomposed(char)])
        if len(_classes_of_parts) >= _DECOMPOSITIONS_KEPT:
            _classes_of_parts.clear()
        _classes_of_parts[char] = kept
    return kept


def _decomposed(char: str) -> str:
    """``_decompose(char)`` as one str, kept: asking the character database for each character of
    a long cluster cost most of its alignment (a bug hunt: Qwen3's ``encode_with_offsets`` of
    ``"\u0344" * 100,000``, marks that decompose, took 3.4x tokenizers' time)."""
    parts = _decompositions.get(char)
    if parts is None:
        parts = "".join(_decompose(char))
        if len(_decompositions) >= _DECOMPOSITIONS_KEPT:
            _decompositions.clear()
        _decompositions[char] = parts
    return parts


def _combining(char: str) -> int:
    return 0 if char in LATE else int(unicodedata2.combining(char))


def _decompose(char: str) -> list[str]:
    code = ord(char)
    if _HANGUL_S <= code < _HANGUL_S + _HANGUL_S_COUNT:
        offset = code - _HANGUL_S
        parts = [chr(_HANGUL_L + offset // _HANGUL_N), chr(_HANGUL_V + (offset % _HANGUL_N) // _HANGUL_T_COUNT)]
        if offset % _HANGUL_T_COUNT:
            parts.append(chr(_HANGUL_T + offset % _HANGUL_T_COUNT))
        return parts
    if char in LATE:
        return [char]
    mapping = unicodedata2.decomposition(char).split()
    if not mapping or mapping[0].startswith("<"):
        return [char]
    return [part for field in mapping for part in _decompose(chr(int(field, 16)))]


def _compose(first: str, second: str) -> str | None:
    """The primary composite of two characters, or None."""
    a, b = ord(first), ord(second)
    if _HANGUL_L <= a < _HANGUL_L + 19 and _HANGUL_V <= b < _HANGUL_V + _HANGUL_V_COUNT:
        return chr(_HANGUL_S + ((a - _HANGUL_L) * _HANGUL_V_COUNT + b - _HANGUL_V) * _HANGUL_T_COUNT)
    if (
        _HANGUL_S <= a < _HANGUL_S + _HANGUL_S_COUNT
        and (a - _HANGUL_S) % _HANGUL_T_COUNT == 0
        and _HANGUL_T < b < _HANGUL_T + _HANGUL_T_COUNT
    ):
        return chr(a + b - _HANGUL_T)
    key = first + second
    composite = _compositions.get(key)
    if composite is None:
        composite = _primary_composite(first, second)
        if len(_compositions) >= _COMPOSITIONS_KEPT:
            _compositions.clear()
        _compositions[key] = composite
    return composite or None


def _primary_composite(first: str, second: str) -> str:
    """The primary composite of the pair, or "" (asked of the normalizer, not of a table).

    NFC turns the pair into one scalar exactly when that scalar's canonical decomposition is the
    pair and it is not excluded from composition: in ``nfc_aligned`` the first is a starter that
    has absorbed marks of lower or equal class only, so NFC finds it in canonical order.
    """
    if first in LATE or second in LATE:
        return ""  # unknown to the reference
    composed = unicodedata2.normalize("NFC", first + second)
    if len(composed) != 1 or composed in LATE:
        return ""
    fields = unicodedata2.decomposition(composed).split()
    if fields != [f"{ord(first):04X}", f"{ord(second):04X}"]:
        return ""
    return str(composed)
