"""The merge table: pair of token ids -> merge value (rank and merged id), with a filter of the pairs
that merge, and ``final_pairs``, the pairs byte-pair merging can apply.

Compiled with mypyc (with ``peek2.bpe.merger``, which looks pairs up here while merging). Key
``left * PAIR_STRIDE + right``, value ``rank << ID_BITS | merged_id``: comparing values compares
ranks. The measurements behind the table's layout, its filter and ``final_pairs`` are in
``peek2.bpe.merger``'s performance notes.
"""

from __future__ import annotations

from typing import Final

from librt.vecs import vec
from mypy_extensions import i64

ID_BITS: Final = 20  # vocabularies up to 1,048,576 ids
ID_MASK: Final = (1 << ID_BITS) - 1
RANK_BITS: Final = 20  # up to 1,048,575 merges
RANK_MASK: Final = (1 << RANK_BITS) - 1
# Pair key = left * PAIR_STRIDE + right. Not ``left << ID_BITS | right``: an int hashes to
# itself, so that key's low bits are ``right`` alone, and every pair ending in the same token
# probes the same dict slots (measured: 16 us per CJK piece instead of 1).
PAIR_STRIDE: Final = 1_048_583  # a prime above 1 << ID_BITS
NO_MERGE: Final = 1 << 60  # above every merge value, and a tagged (unboxed) int
FILTER_WORDS: Final = 1 << 15  # MergeTable's filter: 256 KB, 7.5 bits a merge for Llama-3


class MergeTable:
    """Pair key -> merge value (``rank << ID_BITS | merged_id``), as open addressing in a packed array,
    behind a filter of the pairs that merge (``filter``: two bits a pair, see ``_pair_value``).

    A dict of 280k int keys costs 200-460 ns per lookup here (three dependent cache misses:
    slot, key object, value object). Here slot ``s`` is ``table[2s]``, ``key = left * PAIR_STRIDE
    + right + 1`` (0 is empty), and ``table[2s + 1]``, the value: 2**19 slots of 16 bytes (8 MB)
    for Llama-3's 280k merges, one cache line per lookup (see the performance notes).
    """

    def __init__(self, pair_keys: list[int], pair_values: list[int], filter_words: int = FILTER_WORDS) -> None:
        # The filter: two bits a pair in one of filter_words 64-bit words (0: every pair passes,
        # for measuring without it).
        words: i64 = 1
        while words < filter_words:
            words *= 2
        pair_filter = vec[i64]([0] * words)
        if filter_words == 0:
            pair_filter[0] = -1  # every pair passes
        else:
            for pair_key in pair_keys:
                word, bits = filter_word_bits(pair_key + 1, words - 1)
                pair_filter[word] |= bits
        self.filter: Final = pair_filter
        self.filter_mask: Final[i64] = words - 1
        slots: i64 = 1
        while 2 * slots < 3 * len(pair_keys) + 2:  # load factor at most 2/3
            slots *= 2
        self.mask: Final[i64] = slots - 1
        mask: i64 = slots - 1
        table = vec[i64]([0] * (2 * slots))
        # (A loop, not max() of a list: the list boxed every value, and mypyc's runtime aborts the
        # process where boxing an int finds no memory: a bug hunt's SIGABRT under ulimit -v.)
        highest: i64 = 0
        for k in range(len(pair_values)):
            highest = max(highest, pair_values[k] >> ID_BITS)
        ranks = 1 + highest
        if ranks > RANK_MASK:
            raise ValueError(f"{ranks} merges: at most {RANK_MASK} are supported")
        top: i64 = 0
        for k in range(len(pair_keys)):
            key: i64 = pair_keys[k] + 1
            value: i64 = pair_values[k]
            top = max(top, value & ID_MASK)
            slot = _slot(key, mask)
            while table[2 * slot] != 0 and table[2 * slot] != key:
                slot = (slot + 1) & mask
            table[2 * slot] = key
            table[2 * slot + 1] = value
        self.table: Final = table
        self.top_id: Final = top  # the largest merged id

    def get(self, pair_key: i64) -> i64:
        """The merge value of a pair, or NO_MERGE."""
        table = self.table
        mask = self.mask
        key = pair_key + 1
        slot = _slot(key, mask)
        while True:
            found = table[2 * slot]
            if found == key:
                return table[2 * slot + 1]
            if found == 0:
                return NO_MERGE
            slot = (slot + 1) & mask


def final_pairs(
    merges: MergeTable,
    pair_keys: list[int],
    pair_values: list[int],
    vocab: dict[bytes, int],
    byte_ids: list[int],
    unmerged: list[int] | None = None,
) -> tuple[list[int], list[int]]:
    """The pairs of ``merges`` that byte-pair merging can apply (as ``pair_keys`` and ``pair_values``,
    in their order): of the pairs that make one token, only the last merge of that token's own
    bytes merged alone (none, if they do not merge into it). ``byte_ids``: 256 distinct tokens.

    With ``unmerged`` (a list), the same pass appends to it the tokens of more than one byte whose
    bytes, merged alone, do not end as that token (588 in Llama-3.2's file, 2 in GPT-4o's, none in
    the other files of shared/data). A piece that is any other token needs no merging; the
    whole-token lookup of ``BytePairEncoder`` (without ``ignore_merges``) leaves these out. (A pass
    of its own, over the smaller table, merged every token alone a second time: 78 ms of
    Llama-3.2's uncached load of 870 ms; here it adds 21-46 ms to final_pairs' 58-62 ms.)

    Why that is exact: where merging makes token ``t`` out of a span of a longer piece, every merge
    of a symbol inside the span stayed inside it (symbols only grow, and the span ends as one
    symbol), so each of those merges was of the lowest pair in rank, then leftmost, among the pairs
    inside the span when it ran: they are the merges of ``t``'s bytes alone, in the same order, and
    the last, which makes ``t``, is always the same pair. HuggingFace's Llama-3 files list every
    two-token split of each token (280K merges for 128K tokens), as ``converter_merges`` does for
    tiktoken's rank files (446K pairs for o200k); see the performance notes for what the smaller
    table saves. (So a pair left out is never the lowest when merging anything: the whole table
    and the smaller one merge every piece alike, ``unmerged`` included.)
    """
    makers = vec[i64]([0] * (merges.top_id + 1))  # merged id -> the number of pairs that make it
    for value in pair_values:
        makers[value & ID_MASK] += 1
    final = vec[i64]([-1] * (merges.top_id + 1))  # merged id made by several pairs -> its final pair's key
    scratch = MergeAlone()
    census = unmerged is not None
    for data, token_id in vocab.items():
        several = token_id <= merges.top_id and makers[token_id] >= 2
        if not several and not (census and len(data) > 1):
            continue
        merged = _merge_alone(data, byte_ids, merges, scratch)
        if several and merged == token_id:
            final[token_id] = scratch.last
        if unmerged is not None and len(data) > 1 and merged != token_id:
            unmerged.append(token_id)
    keys: list[int] = []
    values: list[int] = []
    for k in range(len(pair_keys)):
        key: i64 = pair_keys[k]
        value = pair_values[k]
        merged_id: i64 = value & ID_MASK
        if makers[merged_id] < 2 or final[merged_id] == key:
            keys.append(key)
            values.append(value)
    return keys, values


class MergeAlone:
    """Scratch of ``_merge_alone``: its symbols and their pairs' values, and the key of the last
    pair it merged."""

    def __init__(self) -> None:
        self.parts = vec[i64]([0] * 64)
        self.values = vec[i64]([0] * 64)
        self.last: i64 = -1


def _merge_alone(data: bytes, byte_ids: list[int], merges: MergeTable, scratch: MergeAlone) -> i64:
    """Merge ``data`` alone the plain way (rescanning for the lowest value, leftmost first): the one
    token it ends as, or -1 if it ends as several; ``scratch.last``: the last pair merged. For
    tables built at load time (``final_pairs``), not for encoding.

    Each pair's value is looked up once and kept (``scratch.values``): a merge looks up only the
    two pairs it changed, where a rescan looked up every pair again (the 128K tokens of Llama-3.2:
    4.0M -> 2.1M lookups into an 8 MB table).
    """
    if len(data) > ALONE_SCAN_MAX:
        return _merge_alone_heap(data, byte_ids, merges, scratch)
    return _merge_alone_scan(data, byte_ids, merges, scratch)


def _merge_alone_scan(data: bytes, byte_ids: list[int], merges: MergeTable, scratch: MergeAlone) -> i64:
    """``_merge_alone`` by rescanning the pairs' values for the lowest at each merge."""
    count: i64 = len(data)
    if count > len(scratch.parts):
        scratch.parts = vec[i64]([0] * count)
        scratch.values = vec[i64]([0] * count)
    parts = scratch.parts
    values = scratch.values
    for k in range(count):
        parts[k] = byte_ids[data[k]]
    for k in range(count - 1):
        values[k] = merges.get(parts[k] * PAIR_STRIDE + parts[k + 1])
    last: i64 = -1
    while count > 1:
        best: i64 = NO_MERGE
        at: i64 = -1
        for k in range(count - 1):
            if values[k] < best:
                best = values[k]
                at = k
        if at < 0:
            break
        last = parts[at] * PAIR_STRIDE + parts[at + 1]
        parts[at] = best & ID_MASK
        for k in range(at + 1, count - 1):
            parts[k] = parts[k + 1]
            values[k] = values[k + 1]
        count -= 1
        if at > 0:
            values[at - 1] = merges.get(parts[at - 1] * PAIR_STRIDE + parts[at])
        if at + 1 < count:
            values[at] = merges.get(parts[at] * PAIR_STRIDE + parts[at + 1])
    scratch.last = last
    if count == 1:
        return parts[0]
    return -1


ALONE_SCAN_MAX: Final = 256
"""``_merge_alone``: a token of more bytes merges through a heap; the scan is quadratic in its
length (a file with a token of 200,000 characters took 23 s to load, 2.7 s at 80,000; a bug hunt)."""


def _merge_alone_heap(data: bytes, byte_ids: list[int], merges: MergeTable, scratch: MergeAlone) -> i64:
    """``_merge_alone`` of a long token, with the same result: the pair of lowest value first,
    leftmost among equal ones, taken from a heap of (value, position) over a linked list of parts
    (n log n). An entry is stale when its position is gone or its pair's value changed since."""
    n: i64 = len(data)
    parts = vec[i64]([0] * n)
    after = vec[i64]([0] * n)  # the next part's position (n: none)
    before = vec[i64]([0] * n)  # the previous part's position (-1: none)
    values = vec[i64]([NO_MERGE] * n)  # the value of the pair a part starts (NO_MERGE: none, or gone)
    heap_values = vec[i64]([0] * (3 * n + 1))  # n - 1 pairs, then at most two new ones a merge
    heap_positions = vec[i64]([0] * (3 * n + 1))
    size: i64 = 0
    for k in range(n):
        parts[k] = byte_ids[data[k]]
        after[k] = k + 1
        before[k] = k - 1
    for k in range(n - 1):
        value = merges.get(parts[k] * PAIR_STRIDE + parts[k + 1])
        values[k] = value
        if value != NO_MERGE:
            size = _heap_push(heap_values, heap_positions, size, value, k)
    count = n
    last: i64 = -1
    while size > 0:
        value = heap_values[0]
        at = heap_positions[0]
        size = _heap_pop(heap_values, heap_positions, size)
        if values[at] != value:
            continue
        right = after[at]
        last = parts[at] * PAIR_STRIDE + parts[right]
        parts[at] = value & ID_MASK
        values[right] = NO_MERGE
        after[at] = after[right]
        if after[at] < n:
            before[after[at]] = at
        count -= 1
        left = before[at]
        if left >= 0:
            value = merges.get(parts[left] * PAIR_STRIDE + parts[at])
            values[left] = value
            if value != NO_MERGE:
                size = _heap_push(heap_values, heap_positions, size, value, left)
        value = NO_MERGE
        if after[at] < n:
            value = merges.get(parts[at] * PAIR_STRIDE + parts[after[at]])
        values[at] = value
        if value != NO_MERGE:
            size = _heap_push(heap_values, heap_positions, size, value, at)
    scratch.last = last
    if count == 1:
        return parts[0]
    return -1


def _heap_push(heap_values: vec[i64], heap_positions: vec[i64], size: i64, value: i64, position: i64) -> i64:
    """Adds (value, position) to the heap of ``size`` entries; returns its new size."""
    _heap_place(heap_values, heap_positions, size + 1, size, value, position)
    return size + 1


def _heap_pop(heap_values: vec[i64], heap_positions: vec[i64], size: i64) -> i64:
    """Removes the heap's least entry; returns its new size."""
    size -= 1
    _heap_place(heap_values, heap_positions, size, 0, heap_values[size], heap_positions[size])
    return size


def _heap_place(heap_values: vec[i64], heap_positions: vec[i64], size: i64, k: i64, value: i64, position: i64) -> None:
    """Puts (value, position) in the hole at ``k`` of a heap of ``size`` entries: the hole moves up
    past parents that come after the entry (a push: a hole at the end), else down past the lesser
    child while it comes before the entry (a pop: a hole at the root). One loop for both."""
    while True:
        move: i64 = -1
        parent = (k - 1) >> 1
        if k > 0 and not _comes_before(heap_values[parent], heap_positions[parent], value, position):
            move = parent
        else:
            child = 2 * k + 1
            if child < size:
                if child + 1 < size and _comes_before(heap_values[child + 1], heap_positions[child + 1], heap_values[child], heap_positions[child]):
                    child += 1
                if _comes_before(heap_values[child], heap_positions[child], value, position):
                    move = child
        if move < 0:
            break
        heap_values[k] = heap_values[move]
        heap_positions[k] = heap_positions[move]
        k = move
    heap_values[k] = value
    heap_positions[k] = position


def _comes_before(value: i64, position: i64, other_value: i64, other_position: i64) -> bool:
    """Whether (value, position) comes before (other_value, other_position): lower value, then leftmost."""
    return value < other_value or (value == other_value and position < other_position)


def filter_word_bits(key: i64, mask: i64) -> tuple[i64, i64]:
    """The filter word of pair ``key`` and its two bits (``_pair_value`` writes this out)."""
    h = _filter_hash(key)
    return (h >> 32) & mask, _bit((h >> 20) & 63) | _bit((h >> 26) & 63)


def _filter_hash(key: i64) -> i64:
    """A hash of ``key`` (below 2**41) whose bits 20 to 46 are well mixed, with no i64 overflow.

    Pair keys are far from random (one left token with many right ones): a single multiply let
    20% of the non-merging pairs met in text through the merge filter, this 5.6% (the rate of
    random keys). (``_pair_value`` writes this out.)
    """
    mixed = (key & 0x1FFFFF) * 0x9E3779B1 + (key >> 21) * 0x7FEB352D  # below 2**54
    mixed = (mixed ^ (mixed >> 29)) & 0xFFFFFFFF
    return mixed * 0x4F1BBCDD  # below 2**63


def fold_key(key: i64) -> i64:
    """A piece key (below 2**63) folded to 41 bits for ``filter_word_bits``."""
    return (key ^ (key >> 22) ^ (key >> 44)) & ((1 << 41) - 1)


def _bit(position: i64) -> i64:
    """The i64 with only bit ``position`` (0 to 63) set; bit 63 is the sign."""
    return BITS[position]


# (Made from Python ints: mypyc compiles ``x << position`` of an i64 x set to 1 as a C int shift.)
BITS: Final = vec[i64]([1 << k for k in range(63)] + [-(1 << 63)])


def _slot(key: i64, mask: i64) -> i64:
    # Multiplicative mixing; key < 2**41 and the factor < 2**21 keep the product in range.
    # (_pair_value writes the same expression out.)
    return ((key * 1_000_003) >> 11) & mask
