"""Which byte strings start (or end) a longer vocabulary token: the question that
``peek2.bpe.growing_piece`` asks at every landing position of a growing piece.

Tokens of two bytes or more are grouped by their first two bytes (their ids, in one array in
the order of the groups), and a group's tokens are sorted the first time a question needs
them; a one-byte question reads a table of 256 answers.

Performance notes: ``GrowingPiece`` sorted the whole vocabulary at its first long piece (and a
reversed copy of every token at its first ``stable_start``): 30-75 ms, which the first stream,
session or ``encode`` with a piece of more than 128 KB paid in its call (GPT-4o's file, 140,000
"=" in a new process: 84.5 ms, against 8.3 for the second call and 51 for ``tokenizers``; now
33 ms). Grouping in this compiled loop takes a few ms of the same 128-200K tokens, and a growing
piece asks about a handful of groups (a run of "=" one, a CJK run a few dozen of at most a few
hundred tokens each). Ids, not a list of the tokens: 4 bytes a token instead of 8, and a group
of lists took 2.2 MB for Qwen3 where the sorted list had taken 1.2 (a prompt cache's memory
bound, ``tests/test_incremental.py``, counts what a tokenizer keeps after a long run).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

from librt.vecs import vec
from mypy_extensions import i32, i64

GROUPS: Final = 1 << 16


class TokenPrefixes:
    """``is_proper_prefix(key)``: whether some token of ``vocab`` (or, with ``reverse``, some
    token read backwards) starts with ``key`` and is longer. ``id_bytes`` gives each id's bytes
    (a token whose id names other bytes, a file's duplicate id, is kept aside as bytes)."""

    def __init__(self, vocab: dict[bytes, int], id_bytes: tuple[bytes | None, ...], reverse: bool = False) -> None:
        longer = [False] * 256
        some = False  # any token at all (each starts with the empty key)
        longest: i64 = 0
        aside: dict[int, list[bytes]] = {}
        counts = vec[i32]([0] * (GROUPS + 1))
        ids: i64 = len(id_bytes)
        for token, token_id in vocab.items():
            n: i64 = len(token)
            if n == 0:
                continue
            some = True
            longest = max(longest, n)
            if n < 2:
                continue
            group = _group(token, n, reverse)
            longer[group >> 8] = True
            if 0 <= token_id < ids and id_bytes[token_id] == token:
                counts[group + 1] += 1
            else:
                aside.setdefault(group, []).append(token[::-1] if reverse else token)
        for group in range(GROUPS):
            counts[group + 1] += counts[group]
        members = vec[i32]([0] * i64(counts[GROUPS]))
        filled = vec[i32](counts)  # the next free slot of each group
        for token, token_id in vocab.items():
            n = len(token)
            if n >= 2 and 0 <= token_id < ids and id_bytes[token_id] == token:
                group = _group(token, n, reverse)
                members[i64(filled[group])] = i32(token_id)
                filled[group] += 1
        self.id_bytes: Final = id_bytes
        self.reverse: Final = reverse
        self.longer: Final = longer
        self.some: Final = some
        self.longest: Final = longest  # the longest token's bytes
        self.starts: Final = counts  # group -> where its ids start in ``members``
        self.members: Final = members
        self.aside: Final = aside
        self.ready: Final[dict[int, list[bytes]]] = {}  # group -> its keys, sorted (each made once)

    def is_proper_prefix(self, key: bytes) -> bool:
        n: i64 = len(key)
        if n == 0:
            return self.some
        if n == 1:
            return self.longer[key[0]]
        group: i64 = (key[0] << 8) | key[1]
        keys = self.ready.get(group)
        if keys is None:
            keys = self._sorted_group(group)
        k = bisect_left(keys, key)
        if k < len(keys) and keys[k] == key:
            k += 1
        return k < len(keys) and keys[k].startswith(key)

    def _sorted_group(self, group: i64) -> list[bytes]:
        """The keys of ``group``, sorted, kept in ``ready`` (a new list: a thread that reads a
        group while another makes one never sees a half-sorted list)."""
        id_bytes = self.id_bytes
        members = self.members
        keys: list[bytes] = []
        for k in range(i64(self.starts[group]), i64(self.starts[group + 1])):
            token = id_bytes[i64(members[k])] or b""
            keys.append(token[::-1] if self.reverse else token)
        keys += self.aside.get(group, [])
        keys.sort()
        self.ready[group] = keys
        return keys

    def sorted_tokens(self) -> i64:
        """How many tokens the groups sorted so far hold (what the questions asked have cost)."""
        total: i64 = 0
        for keys in self.ready.values():
            total += len(keys)
        return total


def _group(token: bytes, n: i64, reverse: bool) -> i64:
    """The group of a token of ``n`` >= 2 bytes: its first two bytes (last two, read backwards)."""
    if reverse:
        return (i64(token[n - 1]) << 8) | i64(token[n - 2])
    return (i64(token[0]) << 8) | i64(token[1])
