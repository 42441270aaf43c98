"""Finding a tokenizer's added tokens in text: leftmost-longest, non-overlapping, in one pass.

The reference (``tokenizers``' ``AddedVocabulary``) runs an Aho-Corasick automaton with
leftmost-longest matching over the added tokens' contents, then applies ``single_word``,
``lstrip`` and ``rstrip``. ``AddedTokenMatcher.spans`` gives the same segments.

How it stays linear: the contents' trie is one regular expression (``occurrence_pattern``), whose
search from the end of the last match finds the next match, leftmost and longest, in one C
call. At each position the search follows the trie one branch deep (a node's branches start with
different characters), so a search costs at most the longest content's length a character it
passes, and successive searches cover disjoint stretches of the text. (Searching every needle
afresh from each match was quadratic: a Qwen3 chat transcript of 8,000 turns took 37.6 s, because
"<t" of "<think>" was searched to the end of the text after every "<|im_end|>". A heap of each
needle's next occurrence made that linear, and cost about 1 us a match: the single search
replaced it.)

Performance notes (CPU time, Llama-3.1, ``encode`` of ``"<|eot_id|>" * 80000``, where the
matcher's work a match is all there is; tokenizers 0.116-0.124 s): 0.203 s when each length of
the contents that start alike was tried (a slice and a dict lookup each); 0.138 s with the
longest content found by one C call (``occurrence_pattern(..., longest=True)``); 0.083 s with
this module compiled by mypyc (it is among the hot modules since: every text holding an added
token goes through it, and a chat transcript holds one every few words). DeepSeek-V3's
``"<\uff5cend\u2581of\u2581sentence\uff5c>" * 80000``: 0.084 s against tokenizers' 0.37 s. One
search a match (above) and native flags (``_Entry``), with the tokenizer encoding the spans in one
compiled loop (``BytePairEncoder.encode_spans``): 0.051 -> 0.034 s, a Qwen3 chat transcript of
8,000 turns 0.110 -> 0.074 s (tokenizers 0.63 s), a tiktoken rank file's ``"<|endoftext|>x" *
50000`` 0.089 -> 0.031 s (tiktoken 0.017 s: its special tokens are one Rust regex search).

A content longer than ``TRIE_DEPTH`` characters is not in the trie but in an Aho-Corasick
automaton of the long contents (``LongContents``): at each position the trie may follow the text
as deep as the longest content before it fails, and an added token of ``"-" * 2000 + ">"`` over
``"-" * 100000`` took 19x tokenizers' whole encode (a bug hunt); the automaton reads each
character once, apart from what a search reads past a match to be sure that no longer content
starts there (as the reference's leftmost-longest automaton does). Before a short match, a long content can win only where it starts
no later, and the automaton is asked only that far (``ContentSearch.leftmost``). Files have none
(their longest contents are about 30 characters). Bug hunts' adversarial sets, CPU time of
``encode`` over tokenizers' (Llama-3.1 with the contents added, 2026-11-28): a long content
passed by every short match 2.5x, 200 long contents that all occur every other character 2.5x,
200 absent 6.1x, the dashes above 1.6x, 200 long contents and no short one 2.4x (0.48x when each
long content was searched on its own with ``str.find``).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Final, Iterable, Iterator

import unicodedata2  # type: ignore[import-not-found]  # ships no type stubs
from librt.vecs import append, vec
from mypy_extensions import i64

from peek2.spec import AddedToken

WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
"""What the reference's ``lstrip``/``rstrip`` strip (Rust ``char::is_whitespace``)."""


def is_word_char(char: str) -> bool:
    """Rust regex ``\\w``: alphabetic, marks, decimal digits, connector punctuation, joiners.

    Alphabetic holds letters, Nl, and Other_Alphabetic, which is marks apart from the circled and
    squared Latin letters (So): U+24B6..U+24E9, U+1F130..U+1F149, U+1F150..U+1F169,
    U+1F170..U+1F189 (a bug hunt found them, every scalar after a ``single_word`` token)."""
    category: str = unicodedata2.category(char)
    if category[0] in "LM" or category in ("Nd", "Nl", "Pc") or char in "\u200c\u200d":
        return True
    code = ord(char)
    return 0x24B6 <= code <= 0x24E9 or (0x1F130 <= code <= 0x1F189 and (code - 0x1F130) % 32 < 26)


def occurrence_pattern(contents: Iterable[str], longest: bool = False, grouped: bool = False) -> re.Pattern[str] | None:
    """A pattern that matches where one of ``contents`` starts (None for no contents): their trie
    as nested alternatives, each stopping at the shortest content, since only whether one occurs is
    asked. An alternation of the contents themselves tries each at every position: over
    ``"<\uff5c" * 320000`` with DeepSeek-V3's 818 added tokens (most start with "<\uff5c") it
    took 3.9 s of a 4 s encode, against 1.0 s for all of tokenizers' encode (a bug hunt).

    ``longest``: the same trie, matching the longest content instead (a content that ends at a
    node is the last alternative there, tried after every longer one; the branches of a node
    start with different characters, so the backtracking is at most the trie's depth).

    ``grouped``: the whole pattern is one capturing group, so that its ``split`` gives the contents
    found between the texts (one compile serves ``search`` and ``split``)."""
    trie: dict[str, Any] = {}
    for content in contents:
        if content:
            node = trie
            for char in content:
                node = node.setdefault(char, {})
            node[""] = None  # (a content ends here)

    def alternatives(node: dict[str, Any]) -> str:
        if "" in node and (not longest or len(node) == 1):
            return ""
        branches = []
        for char in sorted(key for key in node if key):
            child, literal = node[char], re.escape(char)
            while "" not in child and len(child) == 1:  # (a chain of one child each: one literal)
                (following, child), = child.items()
                literal += re.escape(following)
            branches.append(literal + alternatives(child))
        if "" in node:
            branches.append("")  # (longest: this content, once no longer one matches)
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    if not trie:
        return None
    return re.compile(f"({alternatives(trie)})" if grouped else alternatives(trie))

_EDGE_STRIDE: Final = 0x110000
"""An edge's key is ``node * _EDGE_STRIDE + code point``."""


class UnencodableText(ValueError):
    """A text ``tokenizers`` cannot encode either (it panics): an ``lstrip`` token inside the
    whitespace that an ``rstrip`` token before it took. Streams and prompt sessions refuse it as
    they refuse a bad chunk, staying as they were before the call."""


class LongContents:
    """The long contents' Aho-Corasick automaton, searched leftmost-longest as the reference's
    (the ``aho-corasick`` crate with ``MatchKind::LeftmostLongest``) searches all contents.

    A state is a trie node: the longest suffix of the text read that starts some content. Its
    ``fail`` is the node of the next shorter such suffix, and ``ends`` the length of the longest
    content that ends there (a suffix of the node's string). Reading a character costs one probe of
    the edges' table, plus the failures, which over a search cost no more than its characters.

    Performance notes (a bug hunt's adversarial set, 200 random contents of "a" and "b", 65-400
    characters, over 200,000 random "a"/"b", compiled, CPU time of ``encode``; tokenizers 0.070
    s): each content searched on its own with ``str.find`` (and checked with ``in`` at each
    text), 0.184 s; this automaton, see ``ContentSearch``. The edges are one open-addressed table
    of ``vec[i64]`` (two words a slot, half full), not a dict of Python ints: a content of 100,000
    characters is 100,000 nodes.
    """

    def __init__(self, contents: list[str]) -> None:
        slots: i64 = 16
        total: i64 = 1
        for content in contents:
            total += len(content)
        while slots < 2 * total:
            slots *= 2
        self._mask: i64 = slots - 1
        keys = vec[i64]([-1] * slots)
        children = vec[i64]([0] * slots)
        depth = vec[i64]([0])
        ends = vec[i64]([0])
        # The trie (node 0 its root).
        for content in contents:
            node: i64 = 0
            for char in content:
                key = node * _EDGE_STRIDE + ord(char)
                slot = self._slot(keys, key)
                if keys[slot] == key:
                    node = children[slot]
                    continue
                child: i64 = len(depth)
                keys[slot] = key
                children[slot] = child
                depth = append(depth, depth[node] + 1)
                ends = append(ends, 0)
                node = child
            ends[node] = len(content)
        fail = vec[i64]([0] * len(depth))
        self._keys = keys
        self._children = children
        # Failure links by depth (a node's is found from its parent's, and points to a shallower
        # node): the nodes in order of depth by a counting sort, and each one's parent and char
        # from the edges' keys.
        nodes: i64 = len(depth)
        first = vec[i64]([0] * (nodes + 1))
        for node in range(1, nodes):
            first[depth[node]] += 1
        placed: i64 = 0
        for level in range(nodes + 1):
            count = first[level]
            first[level] = placed
            placed += count
        order = vec[i64]([0] * (nodes - 1))
        for node in range(1, nodes):
            order[first[depth[node]]] = node
            first[depth[node]] += 1
        parent_of = vec[i64]([0] * len(depth))
        char_of = vec[i64]([0] * len(depth))
        for slot in range(slots):
            key = keys[slot]
            if key >= 0:
                child = children[slot]
                parent_of[child] = key // _EDGE_STRIDE
                char_of[child] = key % _EDGE_STRIDE
        for node in order:
            parent = parent_of[node]
            if parent != 0:
                fail[node] = self._step(fail[parent], char_of[node], fail)
            if ends[node] == 0:
                ends[node] = ends[fail[node]]
        self._fail = fail
        self._depth = depth
        self._ends = ends

    def _slot(self, keys: vec[i64], key: i64) -> i64:
        """The slot of ``key`` in the edges' table, or the empty slot where it would go."""
        mask = self._mask
        mixed = key ^ (key >> 21) ^ (key >> 40)
        slot = (((mixed & 0xFFFFFFF) * 0x9E3779B1) >> 20) & mask  # product below 2**60
        while keys[slot] != key and keys[slot] != -1:
            slot = (slot + 1) & mask
        return slot

    def _step(self, node: i64, code: i64, fail: vec[i64]) -> i64:
        """The state after reading the character ``code`` in state ``node``."""
        keys = self._keys
        while True:
            key = node * _EDGE_STRIDE + code
            slot = self._slot(keys, key)
            if keys[slot] == key:
                return self._children[slot]
            if node == 0:
                return 0
            node = fail[node]

    def leftmost(self, text: str, at: i64, bound: i64) -> tuple[i64, i64]:
        """The leftmost occurrence of a content in ``text`` that starts at or after ``at`` and no
        later than ``bound``, and the longest content there, as ``(start, length)``; ``(-1, 0)``
        where there is none. The search stops once every content it is reading started after
        the best so far (or after ``bound``): a longer or earlier one can no longer appear."""
        fail = self._fail
        depth = self._depth
        ends = self._ends
        n: i64 = len(text)
        node: i64 = 0
        best: i64 = -1
        best_length: i64 = 0
        limit = bound
        i = at
        while i < n:
            node = self._step(node, ord(text[i]), fail)
            i += 1
            if i - depth[node] > limit:
                break  # (every content being read starts after the limit)
            length = ends[node]
            if length > 0:
                start = i - length
                if start <= limit and (best < 0 or start < best or (start == best and length > best_length)):
                    best = start
                    best_length = length
                    limit = start
        return best, best_length


TRIE_DEPTH = 64
"""The longest content searched in the trie (``occurrence_pattern``); longer ones alone."""


class ContentSearch:
    """Where contents occur: the contents of at most ``TRIE_DEPTH`` characters as their trie
    (``occurrence_pattern``), the longer ones as an automaton (``LongContents``; see the module
    notes)."""

    def __init__(self, contents: Iterable[str], longest: bool = False) -> None:
        distinct = {content for content in contents if content}
        self._short = [content for content in distinct if len(content) <= TRIE_DEPTH]
        self._longest = longest
        self._search: Callable[..., re.Match[str] | None] | None = None
        self._finditer: Callable[[str], Iterator[re.Match[str]]] | None = None
        self._split: Callable[[str], list[str]] | None = None
        self._ready = False
        self.long: list[str] = sorted(content for content in distinct if len(content) > TRIE_DEPTH)
        self.empty = not distinct
        self._long = LongContents(self.long) if self.long else None

    def _prepare(self) -> None:
        """Compile the trie's pattern, at the first search: a tokenizer made again with one more
        added token (the transformers patch after ``add_tokens``) compiled two patterns of all the
        contents in each of three searches at once, 1.1 s of 1.8 s with 5,000 tokens, where most
        calls ask no search (a bug hunt). One grouped pattern serves ``search`` and ``split``."""
        pattern = occurrence_pattern(self._short, self._longest, grouped=True)
        if pattern is not None:
            self._search = pattern.search
            self._finditer = pattern.finditer
            self._split = pattern.split
        self._ready = True

    def each(self, text: str) -> Iterator[re.Match[str]] | None:
        """The leftmost-longest occurrences in ``text``, each after the one before, as ``leftmost``
        gives them one by one (a trie built ``longest``), where no content is long; else None.
        One C iterator: a ``leftmost`` call a match cost 0.33 us of a rank file's encode of
        ``"<|eot_id|>x" * 50000``, tiktoken's whole encode 0.34 us a match."""
        if not self._ready:
            self._prepare()
        if self.long or self._finditer is None:
            return None
        return self._finditer(text)

    def cut(self, text: str) -> list[str] | None:
        """``text`` cut at the occurrences ``each`` gives, as one list of text and contents in turn
        (``["a", "<x>", "", "<x>", ""]``), where no content is long; else None. One C call, with no
        match object a match."""
        if not self._ready:
            self._prepare()
        if self.long or self._split is None:
            return None
        return self._split(text)

    def occurs(self, text: str) -> bool:
        """Whether one of the contents occurs in ``text``."""
        if not self._ready:
            self._prepare()
        if self._search is not None and self._search(text) is not None:
            return True
        return self._long is not None and self._long.leftmost(text, 0, len(text))[0] >= 0

    def leftmost(self, text: str, at: int, state: SearchState) -> tuple[int, str] | None:
        """The leftmost occurrence of a content at or after ``at`` and the longest content there
        (from the trie, the longest if built ``longest``), as ``(start, content)``.

        ``state`` keeps what the searches of one text (whose ``at`` never decreases) found ahead
        of where they stopped, so that no stretch of the text is searched twice: the trie's next
        match, and the long contents' next one where it was searched with no short match ahead.
        With a short match ahead, a long content wins only where it starts no later, and the
        automaton is asked only that far (a bug hunt: ``"yx" * 4000`` with a token ``"xy"`` over
        ``"xy" * 50000``, searched to its next occurrence after each match of "xy", which then
        passed it, was 18x tokenizers' encode)."""
        if not self._ready:
            self._prepare()
        if self._long is None:
            if self._search is None:
                return None
            whole = self._search(text, at)  # (every file seen: no long content)
            return None if whole is None else (whole.start(), whole.group())
        start = -1
        content = ""
        if self._search is not None:
            if -1 < state.short_start < at or state.short_start == -2:
                whole = self._search(text, at)
                state.short_start = -1 if whole is None else whole.start()
                state.short_content = "" if whole is None else whole.group()
            start = state.short_start
            content = state.short_content
        if state.long_start == -1 or (start >= 0 and state.long_start > start):
            return (start, content) if start >= 0 else None  # (no long content starts in time)
        if state.long_start < at:
            long_start, length = self._long.leftmost(text, at, start if start >= 0 else len(text))
            if start < 0:
                state.long_start = long_start  # (-1: none in the rest of the text)
                state.long_length = length
        else:
            long_start, length = state.long_start, state.long_length
        if long_start < 0:
            return (start, content) if start >= 0 else None
        # (a long content is longer than any short one: it wins where both start)
        return long_start, text[long_start : long_start + length]

    def state(self, text: str) -> SearchState:
        """A new ``SearchState`` for the searches of ``text``."""
        return SearchState()


class SearchState:
    """What ``ContentSearch.leftmost`` found ahead in one text: the trie's next match
    (``short_start``: -2 not searched, -1 none) and the long contents' (``long_start``: -2
    unknown, -1 none, else valid while the search's ``at`` has not passed it)."""

    def __init__(self) -> None:
        self.short_start = -2
        self.short_content = ""
        self.long_start = -2
        self.long_length = 0


class _Entry:
    """An added token's fields as native attributes (this module is compiled): ``spans`` reads
    four of them at every match, and each of a dataclass's cost a dictionary lookup."""

    def __init__(self, token: AddedToken) -> None:
        self.token = token
        self.id: int = token.id
        self.special: bool = token.special
        self.normalized: bool = token.normalized
        self.lstrip: bool = token.lstrip
        self.rstrip: bool = token.rstrip
        self.single_word: bool = token.single_word


class AddedTokenMatcher:
    """Finds added tokens in text: leftmost-longest, non-overlapping, like the reference's Aho-Corasick."""

    def __init__(
        self, tokens: Iterable[AddedToken], normalize: Callable[[str], str] | None = None, *, normalized_in_gaps: bool = False
    ) -> None:
        # normalized_in_gaps: one pass over raw and normalized tokens (a stream's), where a
        # normalized one may start only after the previous token stops, as the reference's second
        # pass sees only the text between the first pass's tokens (an rstrip token's whitespace
        # is not there: "<z>" rstrip, then a normalized "\xa0<y>", in "<z>\xa0<y>").
        self.normalized_in_gaps = normalized_in_gaps
        # Contents by their first two characters, as the lengths to try (longest first), so that
        # a "<" in source code costs one dict lookup, not a startswith per Llama-3 special token.
        self.by_content: dict[str, AddedToken] = {}
        self.lengths: dict[str, list[int]] = {}
        for token in tokens:
            content = normalize(token.content) if normalize is not None else token.content
            if content and content not in self.by_content:  # the first of equal contents wins
                self.by_content[content] = token
                lengths = self.lengths.setdefault(content[:2], [])
                if len(content) not in lengths:
                    lengths.append(len(content))
        for lengths in self.lengths.values():
            lengths.sort(reverse=True)
        self._entries = {content: _Entry(token) for content, token in self.by_content.items()}
        self.first_chars = sorted({content[0] for content in self.by_content})
        # A match starts at an occurrence of one of these (see the module notes).
        self.needles = frozenset(content[:2] for content in self.by_content)
        # Where a whole content starts (see _find).
        self._contents = ContentSearch(self.by_content, longest=True)
        # Whether each match is a token just as found (none strips whitespace or is single_word),
        # so that ``cut`` says all ``spans`` says.
        self._as_found = not normalized_in_gaps and not any(
            entry.lstrip or entry.rstrip or entry.single_word for entry in self._entries.values()
        )
        self._any_special = any(entry.special for entry in self._entries.values())
        self.ids = {content: entry.id for content, entry in self._entries.items()}
        """Each content's id (see ``cut``)."""

    def has_needle(self, text: str, start: int = 0) -> bool:
        """Whether a token may start in ``text`` (an occurrence of a needle) that does not end before
        ``start`` (a stream that knows its text up to ``start`` held none searches only what follows)."""
        for needle in self.needles:
            at = max(0, start - len(needle) + 1)
            if text.find(needle[0], at) >= 0 and text.find(needle, at) >= 0:
                return True
        return False

    def cut(self, text: str, split_special_tokens: bool) -> list[str] | None:
        """What ``spans`` says, as one list of text segments and the contents of tokens in turn
        (``"a<x><x>"``: ``["a", "<x>", "", "<x>", ""]``; ``ids`` gives each content's id), where
        that is all it says: no token strips whitespace or is ``single_word``, none is skipped as
        special, and no content is long; else None.

        Performance notes (compiled, ``encode`` of ``"<|eot_id|>x" * 50000`` by a tiktoken rank
        file): ``spans`` cost 0.029 s of the 0.034 s (a match object, a content string and two
        tuples a match; tiktoken's whole encode 0.017 s); with one ``re.split`` and the ids looked
        up in the engine's loop (``BytePairEncoder.encode_cut``), the whole encode takes 0.010 s.
        Llama-3.1's ``"<|eot_id|>" * 80000``: 0.032 -> 0.012 s (tokenizers 0.15 s).
        """
        if not self._as_found or (split_special_tokens and self._any_special):
            return None
        return self._contents.cut(text)

    def split(self, text: str, split_special_tokens: bool) -> list[tuple[str, int]]:
        """``text`` cut into text segments (id -1) and added tokens (their id), in order (the text
        of each of ``spans``: a segment may repeat the end of the one before, see there)."""
        return [(text[start:stop], token_id) for start, stop, token_id in self.spans(text, split_special_tokens)]

    def spans(
        self,
        text: str,
        split_special_tokens: bool,
        matches: list[tuple[int, int, int, bool]] | None = None,
        absorbed: int = -1,
        open_end: bool = False,
    ) -> list[tuple[int, int, int]]:
        r"""``text`` cut into text segments (id -1) and added tokens (their id), as ``(start, stop, id)``.

        The spans go in order and cover the text. They do not overlap, except after a token that
        takes the whitespace after it (``rstrip``), where the reference does what follows: it
        finds the matches in the text first, then widens each, and a match that starts in a
        widened token's whitespace is still a token, which starts there (``"<x>" rstrip`` then
        ``" <y>"``: ``"<x> <y>"`` is ``<x>`` over (0, 4) and ``<y>`` over (3, 7)); the text after a
        token starts where the token stops, even where that is inside the whitespace taken before
        (a token ``"\n\n"`` in ``"<x>\n\n\n b"``: ``<x>`` (0, 7), ``"\n\n"`` (3, 5), then the text
        ``"\n b"`` from 5). An ``lstrip`` token never starts before the end of the one before, and
        one that the whitespace before took whole (``" "`` lstrip and rstrip in ``"  "``) is no
        token at all: the reference leaves it an empty split, which it drops.

        For a stream (``peek2.serving.stream_engine``), which must not cut the text inside any
        match: ``matches`` receives every match found, in order, as ``(found, end, stop, rstrip)``:
        where its content starts and ends in ``text`` (an ``lstrip`` token's span may start later,
        at the end of the token before), where the text after it starts (``done``; -1 if the
        match was discarded: ``single_word``, or a special token with ``split_special_tokens``; a
        discarded match still uses up its text, so no match starts inside it), and whether that
        is the end of the whitespace run after it (an ``rstrip`` token: more whitespace at the end
        of ``text`` would go to it). ``absorbed`` (not -1):
        ``text`` starts inside the whitespace that an ``rstrip`` token before it is taking (a
        stream cut there), and ``text[:absorbed]`` is known to be whitespace: the scan goes on as
        after that token, whose whitespace run ends at the first other character. ``open_end``:
        more text may follow (a stream's text so far), so a match whose text runs to the end may
        be the start of a longer one: where such a match could not be a token (an ``lstrip`` one in
        the whitespace taken before it), the scan ends there, its text left to the next call.
        """
        n = len(text)
        done = 0  # where the previous token stopped (the reference's start_offset)
        run_from = run_to = -1  # the last whitespace run walked by rstrip: text[run_from:run_to]
        if absorbed >= 0:
            done = absorbed
            while done < n and text[done] in WHITESPACE:
                done += 1
            run_from, run_to = 0, done
        if not self.needles or not any(needle[0] in text and needle in text for needle in self.needles):
            return [(done, n, -1)] if done < n else []
        out: list[tuple[int, int, int]] = []
        taken_by = ""  # the last token kept (the whitespace after it is its own if it is rstrip)
        at = 0  # where the search for the next match goes on: the end of the last match
        state = self._contents.state(text)  # (see ContentSearch.leftmost)
        # The usual case (no long content, no stream's gaps) in one C iterator: each match of the
        # trie from the end of the one before is what ``_find`` would give (see ContentSearch.each).
        each = self._contents.each(text) if not self.normalized_in_gaps else None
        while at < n:
            if each is not None:
                whole = next(each, None)
                if whole is None:
                    break
                found = whole.start()
                content = whole.group()
                token = self._entries[content]
            else:
                hit = self._find(text, at, done if self.normalized_in_gaps else 0, state)
                if hit is None:
                    break
                found, content, token = hit
            start = found
            stop = start + len(content)
            at = stop  # matches never overlap, even a discarded one (as the reference iterates)
            if (split_special_tokens and token.special) or (token.single_word and (
                (start > 0 and is_word_char(text[start - 1])) or (stop < n and is_word_char(text[stop]))
            )):
                if matches is not None:
                    matches.append((start, stop, -1, False))
                continue
            if token.lstrip:
                if start < done:
                    start = done
                while start > done and text[start - 1] in WHITESPACE:
                    start -= 1
            if token.rstrip:
                if run_from <= stop <= run_to:
                    stop = run_to  # (matches inside one long run: each walk would go to its end again)
                else:
                    run_from = stop
                    while stop < n and text[stop] in WHITESPACE:
                        stop += 1
                    run_to = stop
            if start > stop:
                if open_end and self._may_grow(text[found:]):
                    # A stream's text so far, cut where a longer content may start (``"  >"``
                    # rstrip, ``" "`` lstrip: ``"  >  "`` then ``">"``): not known yet. (It was
                    # refused, on text that the whole encode takes; a bug hunt.)
                    break
                # An lstrip token inside the whitespace an rstrip token took: the reference slices
                # backwards there and panics ("AddedVocabulary bad split"); refuse it by name.
                taker = f"the rstrip token {taken_by!r}" if taken_by else "the rstrip token before it"
                raise UnencodableText(
                    f"the added token {token.token.content!r} at {found} lies in the whitespace taken by "
                    f"{taker}, and is lstrip: tokenizers cannot encode this text either"
                )
            if done < start:
                out.append((done, start, -1))
            if start < stop:  # (an lstrip token that the whitespace before took whole is empty: dropped, as the reference drops empty splits)
                out.append((start, stop, token.id))
                taken_by = token.token.content  # (named by the error above: the doc promises both tokens)
            if matches is not None:
                matches.append((found, found + len(content), stop, token.rstrip))
            done = stop
        if done < n:
            out.append((done, n, -1))
        return out

    def _may_grow(self, rest: str) -> bool:
        """Whether ``rest`` (a text's end) is the start of a content longer than it."""
        return any(len(content) > len(rest) and content.startswith(rest) for content in self.by_content)

    def _find(self, text: str, at: int, normalized_from: int, state: SearchState) -> tuple[int, str, _Entry] | None:
        """The leftmost match at or after ``at``; the longest among those starting there (a
        normalized token only from ``normalized_from`` on)."""
        # One C call finds the leftmost start of a content and the longest content there (the
        # trie pattern with ``longest``). It replaced a heap of the needles' next occurrences
        # (``str.find``), then a search for the start of any content, then the longest content
        # there: three steps a match, about 1 us, where tiktoken takes 0.3 us ("<|endoftext|>x"
        # * 50,000 at 0.19x its speed; a bug hunt).
        contents = self._contents
        while not contents.empty and at < len(text):
            whole = contents.leftmost(text, at, state)
            if whole is None:
                return None
            start, content = whole
            matched = self._entries[content]
            if start >= normalized_from or not matched.normalized:
                return start, content, matched
            # A normalized content where only raw ones may start: a shorter raw one may.
            for key in (text[start : start + 2], text[start]):  # two-character contents and longer, then one
                for length in self.lengths.get(key, ()):
                    shorter = text[start : start + length]
                    token = self._entries.get(shorter)
                    if token is not None and not token.normalized:
                        return start, shorter, token
            at = start + 1
        return None


