"""Which characters may enter the merge as their own token instead of their UTF-8 bytes.

Byte-level BPE starts a piece from its bytes, so most merges of a non-Latin piece only rebuild
its characters: in 1 MB of Chinese, 88% of the merges join the three bytes of a character
before any merge between characters happens. ``peek2.bpe.merger._merge_text`` starts such a
piece from the characters' tokens instead, when that cannot change the ids. It cannot when,
for a character ``c`` whose bytes byte-level BPE alone merges into one token ``t`` with merges
of ranks up to ``R``:

1. no merge involving ``t`` has a rank below or equal to ``R`` (so no merge with ``t`` could
   have happened before ``t`` exists; trained merge lists are ordered like this, and a few
   hundred Llama-3 characters still fail it and keep their bytes), and
2. no merge can join part of ``c``'s bytes with bytes outside ``c``: every merged token that
   starts inside a character (with continuation bytes) or ends inside one (with an incomplete
   sequence) is looked at, and ``c`` keeps its bytes next to a neighbour with which such a
   token could form. " \\xe5" (Llama-3: a space and the first byte of many Chinese characters)
   makes those characters keep their bytes after an ASCII character; "\\x8e\\xb7\\xe5\\x8f\\x96"
   (the end of 获 and all of 取) makes 获 keep its bytes before 取. Only the character next to
   ``c``'s part matters, as such a token forms only where it follows (or precedes) ``c``:
   "\\x84\\xe1\\x80\\xba\\xe1\\x80" (DeepSeek-V3: the end of 的, U+103A, the start of another
   Myanmar character) makes 的 keep its bytes before U+103A; "\\x82\\xe0\\xb0" (the end of 。,
   the first two bytes of a Telugu character) makes 。 keep its bytes before the 64 characters
   U+0C00-U+0C3F; "\\x80\\xe0\\xb8" (o200k: a last byte, the start of a Thai character) makes
   Thai characters keep their bytes after the characters whose last byte is 0x80. Where the
   token holds less of its neighbour (one lead byte of a three-byte character, two continuation
   bytes before ``c``), ``c`` always keeps its bytes.

Why the ids are unchanged: by 2, the bytes of ``c`` merge only among themselves, in the order
BPE of ``c`` alone gives, and nothing outside can merge with part of them. By 1, any merge
that the whole-character start makes available early (one involving ``t`` before ``t`` would
exist in byte-level BPE) has a rank above every merge still pending inside ``c``, so it is not
the lowest-ranked pair until ``t`` would exist anyway; each merge between characters therefore
happens at the same step, position and rank in both, and both end in the same tokens.
tests/test_whole_chars.py checks this against plain byte-level BPE on every qualifying
character in the contexts that exclude it, and the XNLI and fuzz runs check the ids against
tokenizers.

Only code points below ``WHOLE_CHARS`` (two- and three-byte characters) are considered, and
only when every byte is its own token (``byte_fallback``/``unk_token`` vocabularies keep the
byte path).

Performance notes: DeepSeek-V3's merges hold 32 tokens like "\\x82\\xe0\\xb0" (the last byte of
a character, then part of another): when such a token made every character ending in that byte
keep its bytes, 48% of the Chinese characters of the CJK corpus did (的, 。, 我, 一 ...); only
before the neighbour the token names (one character, or a block of 64), 0.1%. Encode of that
corpus, DeepSeek-V3 against Llama-3.1: 0.66x -> 0.81x (34.7 -> 45.3 MB/s; ``python
scripts/bench_families.py --runs 5 --corpus cjk``, two runs). The merges looked at are those that
can apply (``final_pairs``), and a token of one last byte then the start of ``c`` keeps ``c``'s
bytes only after characters ending in that byte: o200k_base's Thai characters entering whole
21% -> 100% of the XNLI sentences' Thai, its non-ASCII characters 89% -> 99.9%. This runs once per load (a load without the load cache). Compiled with mypyc:
Qwen3's load 0.58 -> 0.51 s, GPT-4o's 0.66 -> 0.60 s, Llama-3.2's 0.66 -> 0.65 s
(``python scripts/bench_load.py --runs 3``, "no cache"; single runs, noisy). The pass over the
merges looked each merge's two tokens up by their bytes and its pair in the merge table (random
reads of its 8 MB: a quarter of the samples, ``perf record -e cpu-clock``); it now reads the
merges' ids in rank order (``peek2.bpe.vocab.pair_table`` writes them) and which rank the table
holds from one sequential pass over the table: ``whole_chars`` alone, best of 3, Llama-3.2 0.30-0.36
-> 0.054 s, GPT-4o 0.25 -> 0.09 s, Qwen3 0.15 -> 0.09 s, the same lists (checked on every file of
``../shared/data/tokenizers`` and GPT-2's two files).
"""

from __future__ import annotations

from collections import defaultdict

from librt.strings import read_i32_le
from librt.vecs import vec
from mypy_extensions import i64

from peek2.bpe.merge_table import ID_BITS, ID_MASK, NO_MERGE, PAIR_STRIDE, MergeTable
from peek2.bpe.merger import (
    WHOLE_CHARS,
    WHOLE_NOT_AFTER_ASCII,
    WHOLE_NOT_AFTER_LISTED,
    WHOLE_NOT_AFTER_TAIL,
    WHOLE_NOT_BEFORE_ASCII,
    WHOLE_BLOCKS,
    WHOLE_NOT_BEFORE_BLOCK,
    WHOLE_NOT_BEFORE_LISTED,
    WholeChars,
)
from peek2.spec import TokenizerSpec

_NO_MERGE_RANK = 1 << 40  # above every rank


WholeCharsLists = tuple[list[int], list[int], list[int]]
"""The arguments of ``WholeChars`` (entries, before, after): plain data, kept in the load cache."""


def whole_chars(spec: TokenizerSpec, merges: MergeTable, byte_ids: list[int], merge_pairs: bytes) -> WholeCharsLists:
    """The ``WholeChars`` of a byte-level BPE vocabulary, as its arguments (none if its bytes are
    not all tokens, or if two tokens share an id). ``merge_pairs``: the merges as their tokens'
    ids, in rank order (``peek2.bpe.vocab.pair_table``)."""
    vocab = spec.vocab
    if any(vocab.get(bytes([byte])) != byte_ids[byte] for byte in range(256)):
        return ([], [], [])
    id_bytes: list[bytes | None] = [None] * (max(vocab.values()) + 1)
    for token, token_id in vocab.items():
        if id_bytes[token_id] is not None:
            return ([], [], [])  # (an id of two tokens: which bytes it merges from is not one answer)
        id_bytes[token_id] = token
    # Characters of 2 or 3 bytes that are a token, with the highest merge rank BPE uses on them.
    candidates: dict[bytes, tuple[int, int]] = {}  # UTF-8 -> (token id, highest rank used)
    by_id: list[bytes | None] = [None] * len(id_bytes)  # the candidates by id
    for token, token_id in vocab.items():
        if 2 <= len(token) <= 3 and token[0] >= 0xC0:
            try:
                if len(token.decode("utf-8")) != 1:
                    continue
            except UnicodeDecodeError:
                continue
            highest = _merges_into_one(token, token_id, byte_ids, merges)
            if highest >= 0:
                candidates[token] = (token_id, highest)
                by_id[token_id] = token
    # One pass over the merges that can apply (those ``merges`` holds at their rank: see
    # ``peek2.bpe.merge_table.final_pairs``): the lowest rank of a merge involving each candidate's
    # token (condition 1), and the merged tokens that start or end inside a character (condition 2).
    # By rank, from one sequential read of the table and the merges' ids, not a lookup of each
    # merge's bytes and pair (random reads of 8 MB: see the performance notes).
    count = len(merge_pairs) // 8
    merged_at = vec[i64]([-1] * count)  # rank -> the token its merge makes, if the table holds it at that rank
    table = merges.table
    for slot in range(0, len(table), 2):
        if table[slot] != 0:
            value = table[slot + 1]
            merged_at[value >> ID_BITS] = value & ID_MASK
    lowest: dict[bytes, int] = {}
    straddling: list[bytes] = []
    for rank in range(count):
        merged_id = merged_at[rank]
        if merged_id < 0:
            continue
        left = by_id[read_i32_le(merge_pairs, 8 * rank)]
        if left is not None and left not in lowest:
            lowest[left] = rank  # ranks ascend: the first is the lowest
        right = by_id[read_i32_le(merge_pairs, 8 * rank + 4)]
        if right is not None and right not in lowest:
            lowest[right] = rank
        merged = id_bytes[merged_id]
        assert merged is not None  # (a merge's token is in the vocabulary: pair_table checked)
        if not merged.isascii():
            try:
                merged.decode("utf-8")
            except UnicodeDecodeError:
                straddling.append(merged)
    flags: dict[bytes, int] = {
        c: 0 for c, (_, highest) in candidates.items() if lowest.get(c, _NO_MERGE_RANK) > highest
    }
    by_prefix: dict[bytes, list[bytes]] = defaultdict(list)
    by_suffix: dict[bytes, list[bytes]] = defaultdict(list)
    for c in flags:
        for k in range(1, len(c)):
            by_prefix[c[:k]].append(c)
            by_suffix[c[k:]].append(c)
    before: set[tuple[bytes, str]] = set()  # (c, previous character) next to which c keeps its bytes
    after: set[tuple[bytes, str]] = set()  # (c, next character)
    after_blocks: set[tuple[bytes, int]] = set()  # (c, the next character's code point >> 6)
    before_tails: set[tuple[bytes, int]] = set()  # (c, the previous character's code point & 63)
    excluded: set[bytes] = set()
    for token in straddling:
        inside_start, inside_end = _partial_ends(token)
        if inside_end is not None:  # token = rest + a proper prefix of a character
            previous = _last_char(token[: len(token) - len(inside_end)])
            tail = token[: len(token) - len(inside_end)]
            for c in by_prefix.get(inside_end, ()):
                if previous is None and len(tail) == 1:  # the last byte of a character
                    flags[c] |= WHOLE_NOT_AFTER_TAIL
                    before_tails.add((c, tail[0] & 63))
                elif previous is None:
                    excluded.add(c)  # the end of a character, of two bytes: keep c's bytes everywhere
                elif ord(previous) < 128:
                    flags[c] |= WHOLE_NOT_AFTER_ASCII
                else:
                    flags[c] |= WHOLE_NOT_AFTER_LISTED
                    before.add((c, previous))
        if inside_start is not None:  # token = a proper suffix of a character + rest
            following = _first_char(token[len(inside_start) :])
            block = _prefix_block(token[len(inside_start) :])
            for c in by_suffix.get(inside_start, ()):
                if following is None and block is not None:  # rest: a character but its last byte
                    flags[c] |= WHOLE_NOT_BEFORE_BLOCK
                    after_blocks.add((c, block))
                elif following is None:
                    excluded.add(c)
                elif ord(following) < 128:
                    flags[c] |= WHOLE_NOT_BEFORE_ASCII
                else:
                    flags[c] |= WHOLE_NOT_BEFORE_LISTED
                    after.add((c, following))
    entries = [-1] * WHOLE_CHARS
    for c, flag in flags.items():
        if c not in excluded:
            entries[ord(c.decode("utf-8"))] = candidates[c][0] | flag
    return (
        entries,
        [ord(previous) << 21 | ord(c.decode("utf-8")) for c, previous in before if c not in excluded]
        + [(WHOLE_BLOCKS + tail) << 21 | ord(c.decode("utf-8")) for c, tail in before_tails if c not in excluded],
        [ord(c.decode("utf-8")) << 21 | ord(following) for c, following in after if c not in excluded]
        + [ord(c.decode("utf-8")) << 21 | (WHOLE_BLOCKS + block) for c, block in after_blocks if c not in excluded],
    )


def _merges_into_one(data: bytes, token_id: int, byte_ids: list[int], merges: MergeTable) -> int:
    """The highest merge rank BPE uses on the 2 or 3 bytes ``data`` alone if it ends as the one
    token ``token_id``, else -1 (written out: this runs for every such token at load time)."""
    first, second = byte_ids[data[0]], byte_ids[data[1]]
    value = merges.get(first * PAIR_STRIDE + second)
    if len(data) == 2:
        return value >> ID_BITS if value < NO_MERGE and value & ID_MASK == token_id else -1
    third = byte_ids[data[2]]
    right = merges.get(second * PAIR_STRIDE + third)
    if value >= NO_MERGE and right >= NO_MERGE:
        return -1
    if value < right:  # (a, b) first: the lower rank (values compare as ranks)
        last = merges.get((value & ID_MASK) * PAIR_STRIDE + third)
    else:
        value = right
        last = merges.get(first * PAIR_STRIDE + (right & ID_MASK))
    if last >= NO_MERGE or last & ID_MASK != token_id:
        return -1
    return max(value, last) >> ID_BITS


def _utf8_or_none(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text or None


def _width(lead: int) -> int:
    return 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4


def _first_char(data: bytes) -> str | None:
    """The character ``data`` (which starts at a character boundary) starts with, None if it is
    incomplete. Only that character matters: the token can form only where it follows."""
    text = _utf8_or_none(data[: _width(data[0])]) if data else None
    return text if text is not None and len(text) == 1 else None


def _prefix_block(data: bytes) -> int | None:
    """The block of 64 code points (code point >> 6) of the characters whose UTF-8 starts with
    ``data``, when ``data`` is a character but its last byte (else None): a token that starts with
    ``data`` after ``c``'s part forms only before a character of that block."""
    if not data or len(data) != _width(data[0]) - 1:
        return None
    for last in (0x80, 0xBF):
        text = _utf8_or_none(data + bytes([last]))
        if text is not None and len(text) == 1:
            return ord(text) >> 6
    return None


def _last_char(data: bytes) -> str | None:
    """The character ``data`` (which ends at a character boundary) ends with, None if it does not
    end with a whole one (it may start inside a character: only its last one matters)."""
    at = len(data) - 1
    while at > 0 and 0x80 <= data[at] < 0xC0:
        at -= 1
    text = _utf8_or_none(data[at:]) if data else None
    return text if text is not None and len(text) == 1 else None


def _partial_ends(token: bytes) -> tuple[bytes | None, bytes | None]:
    """The continuation bytes ``token`` starts with, and the incomplete character it ends with
    (each None if there is none, or if it is the whole token: a part of one character)."""
    lead = 0
    while lead < len(token) and 0x80 <= token[lead] < 0xC0:
        lead += 1
    at, tail = lead, None
    while at < len(token):
        first = token[at]
        width = _width(first)
        if at + width > len(token):
            tail = token[at:]
            break
        at += width
    start = token[:lead] if 0 < lead < len(token) else None
    end = tail if tail is not None and len(tail) < len(token) else None
    return start, end
