"""The piece cache: recent pieces -> their ids, looked up by a key computed from the text in place.

Compiled with mypyc (with ``peek2.bpe.merger``, which looks pieces up here before merging them).

A piece's key (``piece_key``, or ``latin1_key`` from a text's Latin-1 bytes) is made without slicing
the piece out or hashing a str: a short piece's key is its code points packed (equal keys are
equal pieces), a longer one's a hash of them, with the code points packed into words that
``PieceCache`` stores beside its ids and compares on a hit. ``PieceCache`` is open addressing over
one packed array (key and value side by side), its multi-token results in one flat array, its
slots grown as pieces come and emptied when full. The measurements behind each of these choices
are in ``peek2.bpe.merger``'s performance notes.
"""

from __future__ import annotations

from typing import Final

from librt.strings import read_i64_le
from librt.vecs import append, vec
from mypy_extensions import i64

CACHE_MAX_CHARS: Final = 128
EXACT_KEY: Final = 1 << 61  # piece_key: keys from here up are the piece itself (a short int: no boxing)
BLOCK_KEY: Final = 1 << 62  # _block_piece_key's packing (keys stay i64: never boxed)
HASHED_KEY: Final = 1 << 60  # _hashed_key: the hash, the length and the packing below it
HASH_MASK: Final = (1 << 52) - 1
KEY_WORDS: Final = (CACHE_MAX_CHARS + 2) // 3  # _hashed_key's words for the longest cached piece
LOW_BYTES: Final = vec[i64]([(1 << (8 * k)) - 1 for k in range(8)])  # masks of the low k bytes (latin1_key)
HIGH_BITS: Final = -0x7F7F7F7F7F7F7F80  # 0x8080808080808080 as an i64: the top bit of each byte
MAX_CACHE_SIZE: Final = 1 << 22  # PieceCache: pieces at most (up to 2.3 GB if every one is long and rare)
INITIAL_CACHE_SLOTS: Final = 1 << 10  # PieceCache: slots at first (16 KB), doubled as pieces come
MULTI_WORDS_PER_PIECE: Final = 64  # PieceCache: ids and words, 64 a piece of its size on average ...
MULTI_WORDS_MAX: Final = 1 << 23  # ... and 64 MB at most, whatever its size
# Admission (PieceCache.admit): pieces are in length classes (1-7, 8-15, 16-31, 32-63 and 64-128
# characters); after every ADMIT_EPOCH misses of a class, the class is cached sparsely (one miss
# in SPARSE_ADMIT) until the next decision if its hits over that epoch were fewer than its misses
# over SPARSE_ADMIT (a sparse class's hits counted SPARSE_ADMIT times). See PieceCache.admit.
LENGTH_CLASSES: Final = 5
ADMIT_EPOCH: Final = 1024
SPARSE_ADMIT: Final = 8


class PieceCache:
    """Recent pieces -> their ids, looked up straight from the text: no slice, no str hash on a hit.

    Open addressing over one packed array of pairs: ``entries[2s]`` is the key of the piece in
    slot ``s`` (0 = empty) and ``entries[2s + 1]`` its value: the id of a one-token piece, or
    ``-1 - k`` where ``multi[k]`` is the number of ids and the ids follow it. Hash and value
    share a cache line; no list per piece (fewer objects for the garbage collector to visit).
    A hashed key (below EXACT_KEY) always has its ids in ``multi``, followed by the piece's
    code points packed into words (``_hashed_key``), to compare against. At most ``size``
    pieces (half the slots), and ``multi`` at most ``MULTI_WORDS_PER_PIECE`` words a piece on
    average and ``MULTI_WORDS_MAX`` in all (plus the last piece's): when either is full it is emptied.
    """

    def __init__(self, size: int, full: bool = False) -> None:
        if size > MAX_CACHE_SIZE:
            raise ValueError(f"cache_size {size} is above the largest supported, {MAX_CACHE_SIZE} pieces")
        slots: i64 = 2
        while slots < 2 * size:
            slots *= 2
        self.size: Final[i64] = size
        # The slots grow as the cache fills (doubled, rehashed), up to the size's: a large
        # cache_size costs memory only when that many pieces come (10**8 allocated 4.3 GB at load).
        # ``full``: all of them at once (the vocabulary's tokens: their number is known).
        self.max_slots: Final[i64] = slots
        start: i64 = slots if slots < INITIAL_CACHE_SLOTS or full else INITIAL_CACHE_SLOTS
        self.mask: i64 = start - 1
        self.entries = vec[i64]([0] * (2 * start))
        self.multi = vec[i64]()
        # Pieces of 128 rare characters take 600 words each; ordinary ones 2-10.
        self.multi_limit: Final[i64] = min(MULTI_WORDS_PER_PIECE * size, MULTI_WORDS_MAX)
        self.count: i64 = 0
        # Per length class: hits and misses since its last decision, and whether it is sparse
        # (never for a ``full`` table: the vocabulary's tokens, all stored at once).
        self.adaptive: Final = not full
        self.class_hits = vec[i64]([0] * LENGTH_CLASSES)
        self.class_misses = vec[i64]([0] * LENGTH_CLASSES)
        self.class_sparse = vec[i64]([0] * LENGTH_CLASSES)

    def clear(self) -> None:
        """Forget every piece."""
        if self.count:
            entries = self.entries
            for k in range(len(entries)):
                entries[k] = 0
            self.multi = vec[i64]()
            self.count = 0

    def hit(self, length: i64) -> None:
        """Count a hit of a piece of ``length`` characters (for ``admit``)."""
        k = length_class(length)
        self.class_hits[k] = self.class_hits[k] + 1

    def admit(self, length: i64) -> bool:
        """Whether to cache a piece of ``length`` characters that was not found (a miss).

        A piece that never comes again costs its slot, its ids and its packed code points, memory
        written and never read: random CJK words of 1-40 ideographs (one piece each, every one new)
        with GPT-2's ranks, 400K characters, took 48 ms with the cache and 27 ms without, where
        tiktoken takes 44 (a bug hunt; the ids of such a piece are many, all stored). So a class
        of lengths whose pieces came again less than one time in SPARSE_ADMIT over its last epoch
        caches one miss in SPARSE_ADMIT: a piece that does come again is still found after a few
        of its occurrences, and the class's hits (counted SPARSE_ADMIT times over while it is
        sparse) then bring it back to caching every miss.
        """
        if not self.adaptive:
            return True
        k = length_class(length)
        misses = self.class_misses[k] + 1
        if misses >= ADMIT_EPOCH:
            # A sparse class finds about one piece in SPARSE_ADMIT it would find caching every
            # miss: its hits are counted as that many more. (Counted as they were, a class whose
            # pieces come twice, 1 hit a miss when cached, 1 in 15 when sparse, stayed sparse
            # once text of new pieces had made it so: 1.25-1.3x a fresh tokenizer's time; a bug hunt.)
            scale = SPARSE_ADMIT * SPARSE_ADMIT if self.class_sparse[k] else SPARSE_ADMIT
            self.class_sparse[k] = 1 if self.class_hits[k] * scale < misses else 0
            self.class_hits[k] = 0
            misses = 0
        self.class_misses[k] = misses
        return self.class_sparse[k] == 0 or misses % SPARSE_ADMIT == 0

    def holds(self, value: i64, key: i64, words: vec[i64]) -> bool:
        """True when the hashed piece stored with ``value`` is the one packed in ``words``.

        ``key`` is equal to the stored key, so the lengths and packings are equal already.
        """
        multi = self.multi
        at = -value + multi[-1 - value]  # after the ids: -1 - value + 1 + size
        for k in range(word_count(key)):
            if multi[at + k] != words[k]:
                return False
        return True

    def find(self, key: i64, words: vec[i64]) -> i64:
        """The slot of the piece whose ``piece_key`` is ``key`` (filling ``words``), or -1."""
        mask = self.mask
        entries = self.entries
        slot = cache_slot(key, mask)
        stored = entries[2 * slot]
        while stored != 0:
            if stored == key and (key >= EXACT_KEY or self.holds(entries[2 * slot + 1], key, words)):
                return slot
            slot = (slot + 1) & mask
            stored = entries[2 * slot]
        return -1

    def first_id(self, slot: i64) -> i64:
        """The first id of the piece in ``slot`` (the id of a one-token piece)."""
        value = self.entries[2 * slot + 1]
        return value if value >= 0 else self.multi[-value]  # after the size at -1 - value

    def add(self, key: i64, words: vec[i64], ids: vec[i64], size: i64) -> None:
        """Remember ``ids[:size]`` for the piece whose ``piece_key`` is ``key`` (filling ``words``)."""
        if self.count >= self.size or len(self.multi) >= self.multi_limit:
            if self.size == 0:
                return
            self.clear()
        if 2 * (self.count + 1) > self.mask + 1 and self.mask + 1 < self.max_slots:
            self._grow()
        # The ids go to ``multi`` first, and the entry is written only when they are all there:
        # an append that fails (MemoryError) left an entry pointing past ``multi``'s end, where the
        # next piece cached put its own ids, which the first piece then got (a bug hunt).
        value: i64 = 0
        if size == 1 and key >= EXACT_KEY:
            value = ids[0]
        else:
            multi = self.multi
            value = -1 - len(multi)
            multi = append(multi, size)
            for k in range(size):
                multi = append(multi, ids[k])
            if key < EXACT_KEY:
                for k in range(word_count(key)):
                    multi = append(multi, words[k])
            self.multi = multi
        mask = self.mask
        entries = self.entries
        slot = cache_slot(key, mask)
        while entries[2 * slot] != 0:
            slot = (slot + 1) & mask
        entries[2 * slot + 1] = value
        entries[2 * slot] = key
        self.count += 1

    def _grow(self) -> None:
        """Twice the slots, every piece in its new slot (the values, offsets in ``multi``, stay)."""
        old = self.entries
        slots: i64 = len(old)  # = 2 * (the old number of slots)
        mask: i64 = slots - 1
        entries = vec[i64]([0] * (2 * slots))
        for k in range(0, len(old), 2):
            key = old[k]
            if key != 0:
                slot = cache_slot(key, mask)
                while entries[2 * slot] != 0:
                    slot = (slot + 1) & mask
                entries[2 * slot] = key
                entries[2 * slot + 1] = old[k + 1]
        self.entries = entries
        self.mask = mask

    def size_of(self, value: i64) -> i64:
        """How many ids the cached ``value`` stands for."""
        if value >= 0:
            return 1
        return self.multi[-1 - value]

    def copy_ids(self, value: i64, dest: vec[i64], at: i64) -> None:
        """Write the ids of a cached multi-token ``value`` to ``dest[at:]`` (room checked by the caller)."""
        multi = self.multi
        first: i64 = -value  # after the size at -1 - value
        for k in range(multi[first - 1]):
            dest[at + k] = multi[first + k]


def length_class(length: i64) -> i64:
    """The admission class of a piece of ``length`` characters (0 .. LENGTH_CLASSES - 1)."""
    if length < 8:
        return 0
    if length < 16:
        return 1
    if length < 32:
        return 2
    if length < 64:
        return 3
    return 4


def piece_key(text: str, start: i64, end: i64, words: vec[i64]) -> i64:
    """A non-zero key of text[start:end], computed in place.

    A short piece's key is its code points packed (at least EXACT_KEY): equal keys mean equal
    pieces, no comparison needed. Up to 7 code points below 256, 8 below 128, 3 below 65,536 or
    2 of any value fit in 56 bits, and 4 to 7 of one script in 58 (``_block_piece_key``); the kind of
    packing and the length are in the key too, so two packings never meet. Any other piece gets
    a hash (below EXACT_KEY, ``_hashed_key``) and its code points packed into ``words``, for
    ``PieceCache`` to compare. The usual piece (up to 7 code points below 256) is read once, in
    the loop that packs it (see the performance notes).
    """
    n = end - start
    if n <= 7:
        packed = _packed_code_points(text, start, end, 256, 8)
        if packed < 0:
            return _wide_piece_key(text, start, end, words)
        return packed | (1 << 59) | (n << 56) | EXACT_KEY
    if n == 8:  # 8 ASCII code points, 7 bits each: packing 0 and length 0 are theirs alone
        packed = _packed_code_points(text, start, end, 128, 7)
        if packed >= 0:
            return packed | EXACT_KEY
    return _hashed_key(text, start, end, words)


def latin1_key(data: bytes, at: i64, n: i64, words: vec[i64]) -> i64:
    """``piece_key`` of the Latin-1 piece data[at:at + n] (1 <= n <= CACHE_MAX_CHARS, at + n + 8
    <= len(data)): its code points are its bytes, read eight at a time."""
    # The bytes past the piece are masked off (LOW_BYTES). Shifting them out, up then down,
    # relied on i64 dropping the bits shifted past 63: plain Python keeps them, and with
    # PEEK2_PURE=1 a piece's key held the bytes after it, so that ignore_merges' whole-token
    # lookup missed " neredeyse" inside a sentence. (A mask computed here, ``(1 << 8 * n) - 1``,
    # is a C int shift to mypyc, 1 for n = 4, even from an i64 variable holding 1: it folds it.)
    if n <= 7:
        packed = read_i64_le(data, at) & LOW_BYTES[n]
        return packed | (1 << 59) | (n << 56) | EXACT_KEY
    if n == 8:
        w = read_i64_le(data, at)
        if w & HIGH_BITS:  # a byte above 127: hashed, as piece_key does
            return _latin1_hashed_key(data, at, n, words)
        # 7 bits each: the bytes' low bits moved together, pairs, then fours, then all
        w = (w & 0x007F007F007F007F) | ((w & 0x7F007F007F007F00) >> 1)
        w = (w & 0x00003FFF00003FFF) | ((w & 0x3FFF00003FFF0000) >> 2)
        return (w & 0x0FFFFFFF) | ((w >> 4) & 0x00FFFFFFF0000000) | EXACT_KEY
    return _latin1_hashed_key(data, at, n, words)


def _latin1_hashed_key(data: bytes, at: i64, n: i64, words: vec[i64]) -> i64:
    """``latin1_key`` of a piece of 9 code points or more, or of 8 not all ASCII: ``_hashed_key``'s
    words and hash (8 bits a code point, 7 a word)."""
    h: i64 = 0
    count: i64 = 0
    k: i64 = 0
    while k < n:
        word = read_i64_le(data, at + k) & 0x00FFFFFFFFFFFFFF
        if n - k < 7:
            word &= LOW_BYTES[n - k]
        words[count] = word
        count += 1
        h = ((h * 31) ^ word ^ (word >> 23)) & HASH_MASK
        k += 7
    return h | ((n - 1) << 52) | HASHED_KEY


def _packed_code_points(text: str, start: i64, end: i64, below: i64, bits: i64) -> i64:
    """The code points of text[start:end] packed ``bits`` each from bit 0, or -1 if one is not
    below ``below``."""
    packed: i64 = 0
    shift: i64 = 0
    for k in range(start, end):
        c: i64 = ord(text[k])
        if c >= below:
            return -1
        packed |= c << shift
        shift += bits
    return packed


def _wide_piece_key(text: str, start: i64, end: i64, words: vec[i64]) -> i64:
    """``piece_key`` of a piece that is longer than 7 code points or has one above 255."""
    n = end - start
    if n >= 4:
        if n <= 7:
            key = _block_piece_key(text, start, end)
            if key:
                return key
    else:
        packed16: i64 = 0  # 16 bits a code point (used if all are below 65,536)
        packed21: i64 = 0  # 21 bits (used if there are at most 2)
        top: i64 = 0
        shift: i64 = 0
        for k in range(start, end):
            c: i64 = ord(text[k])
            top |= c
            packed16 |= (c & 0xFFFF) << (shift * 16)
            packed21 |= c << (shift * 21)
            shift += 1
        if top < 65_536:
            return packed16 | (2 << 59) | (n << 56) | EXACT_KEY
        if n <= 2:
            return packed21 | (3 << 59) | (n << 56) | EXACT_KEY
    return _hashed_key(text, start, end, words)


def _hashed_key(text: str, start: i64, end: i64, words: vec[i64]) -> i64:
    """The key of a piece no packing fits, with its code points packed into ``words``.

    7 code points a word when all are below 256, else 3 (21 bits each); ``word_count(key)``
    words. The key holds a 52-bit hash of the words, the length and the packing, so that equal
    keys mean pieces of equal length and packing: comparing the words then compares the pieces
    (a few integer comparisons instead of one per code point: see the performance notes).
    """
    h = _pack_words(text, start, end, words, 8, 56)
    if h < 0:  # a code point above 255
        h = _pack_words(text, start, end, words, 21, 63) | (1 << 59)
    return h | ((end - start - 1) << 52) | HASHED_KEY


def _pack_words(text: str, start: i64, end: i64, words: vec[i64], bits: i64, full: i64) -> i64:
    """Pack text[start:end] ``bits`` a code point into words of ``full`` bits; their hash, or -1
    if a code point needs more bits."""
    h: i64 = 0
    word: i64 = 0
    shift: i64 = 0
    count: i64 = 0
    for k in range(start, end):
        c: i64 = ord(text[k])
        if c >> bits:
            return -1
        word |= c << shift
        shift += bits
        if shift == full:
            words[count] = word
            count += 1
            h = ((h * 31) ^ word ^ (word >> 23)) & HASH_MASK
            word = 0
            shift = 0
    if shift:
        words[count] = word
        h = ((h * 31) ^ word ^ (word >> 23)) & HASH_MASK
    return h


def word_count(key: i64) -> i64:
    """How many words ``_hashed_key`` packed the piece of ``key`` into."""
    n = ((key >> 52) & 127) + 1
    if key & (1 << 59):
        return (n + 2) // 3
    return (n + 6) // 7


def _block_piece_key(text: str, start: i64, end: i64) -> i64:
    """The exact key of a piece of 4 to 7 code points in one block of 128 below 65,536, or 0.

    The first code point may instead be ASCII (" слово", "'का"). A word of one script is
    usually such a piece (Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai): on XNLI, 60% of
    the pieces that had to be hashed, and all but 18 of those of 4 to 7 code points. 58 bits: the first
    code point in 8 (a flag for ASCII, 7 bits of it or of its offset in the block), the
    others' offsets in 7 each, the block in 9, ``n - 4`` in 2; bit 62 sets these keys apart
    from the other packings (below 1 << 62) and from hashes.
    """
    block: i64 = ord(text[start + 1]) >> 7
    if block >= 512:
        return 0
    first: i64 = ord(text[start])
    head: i64 = first | 128
    if first >= 128:
        if first >> 7 != block:
            return 0
        head = first & 127
    packed: i64 = 0
    shift: i64 = 8
    for k in range(start + 1, end):
        c: i64 = ord(text[k])
        if c >> 7 != block:
            return 0
        packed |= (c & 127) << shift
        shift += 7
    return head | packed | (block << 50) | ((end - start - 4) << 59) | BLOCK_KEY


def cache_slot(key: i64, mask: i64) -> i64:
    """The home slot of a ``piece_key`` in a table of ``mask + 1`` slots."""
    mixed = key ^ (key >> 28) ^ (key >> 45)
    return (((mixed & 0xFFFFFFF) * 0x9E3779B1) >> 20) & mask  # product below 2**60
