"""Read tiktoken rank files (``*.tiktoken``, Llama-3's ``tokenizer.model``) and rebuild their merges.

A rank file lists every token once (read gzip-compressed too, as ``*.tiktoken.gz``), as ``<base64 bytes> <rank>`` per line, with ranks
0, 1, 2, ... in some order. It has no merges: BPE on ranks merges, at each step, the
adjacent pair whose concatenation has the lowest rank. Two ways to turn that into the
merge list of a HuggingFace ``tokenizer.json``:

- ``recover_merges``: one merge per token, the two parts that byte-pair merging with
  lower ranks only ends on (minbpe's ``recover_merges``). Qwen's tokenizer.json merges
  are exactly these.
- ``converter_merges``: every split of a token into two tokens, as HuggingFace's
  tiktoken converter writes them (Llama-3's tokenizer.json: 280,147 merges for 127,744
  tokens). Used with ``ignore_merges`` this is tiktoken's own algorithm.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
import zlib

from peek2.spec import AddedToken


def load_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Token bytes -> rank, from the rank file at ``path``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed line, a repeated token or rank, or ranks that are not
            exactly 0..n-1 (the message names the file and line).
    """
    source = os.fspath(path)
    with open(path, "rb") as handle:
        data = handle.read()
    if source.endswith(".gz"):  # (as some packages ship them)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise ValueError(f"{source}: not a readable gzip file: {error}") from None
    return parse_ranks(data, source)


def special_added_tokens(special_tokens: dict[str, int]) -> list[AddedToken]:
    """tiktoken's special tokens (content -> id) as added tokens. Reversed: where two names share
    an id (o200k_harmony's ``<|endofprompt|>`` and ``<|reserved_200018|>``), decode gives the first
    one given (tiktoken's is its hash map's pick, which varies from run to run)."""
    return [AddedToken(id=token_id, content=content, special=True) for content, token_id in reversed(special_tokens.items())]


def parse_ranks(data: bytes, source: str = "<bytes>") -> dict[bytes, int]:
    """Token bytes -> rank, from rank file content; ``source`` names it in error messages.

    >>> parse_ranks(b"YQ== 0\\nYg== 1\\nYWI= 2\\n")
    {b'a': 0, b'b': 1, b'ab': 2}
    """
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise ValueError(f"{source}:{number}: expected '<base64 token> <rank>', got {line[:80]!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
        except binascii.Error:
            raise ValueError(f"{source}:{number}: token {fields[0][:80]!r} is not valid base64") from None
        if len(fields[1]) > 19:  # (a larger rank is no id; int() of 4,300 digits or more raised without file or line)
            raise ValueError(f"{source}:{number}: rank {fields[1][:20].decode()}... is too large")
        rank = int(fields[1])
        if not token:
            raise ValueError(f"{source}:{number}: empty token")
        if token in ranks:
            raise ValueError(f"{source}:{number}: token {token!r} repeated (first has rank {ranks[token]})")
        if rank in line_of_rank:
            raise ValueError(f"{source}:{number}: rank {rank} repeated (first on line {line_of_rank[rank]})")
        ranks[token] = rank
        line_of_rank[rank] = number
    if not ranks:  # (else "no token for byte 0x00", far from the cause)
        raise ValueError(f"{source}: no ranks: the rank file is empty")
    # Ranks may leave gaps, as tiktoken allows (p50k_base's file has none at 50256, the id of its
    # special token; they were refused: "ranks are not contiguous", a bug hunt). Each id is one
    # token's or none, as in tokenizer.json files with gaps (GPT-4o's 199998).
    return ranks


def _final_parts(token: bytes, ranks: dict[bytes, int], below: int) -> list[bytes]:
    """The parts byte-pair merging leaves of ``token`` when only ranks under ``below`` may merge."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best = below
        best_at = -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1], below)
            if rank < best:
                best = rank
                best_at = i
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return parts


def _by_rank(ranks: dict[bytes, int]) -> list[bytes]:
    """The tokens in rank order (the ranks may leave gaps)."""
    return sorted(ranks, key=ranks.__getitem__)


def recover_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """One merge per multi-byte token, in rank order: the pair it is built from by BPE on lower ranks.

    Raises ``ValueError`` naming the token when lower ranks do not build it from exactly two parts.

    >>> recover_merges({b"a": 0, b"b": 1, b"ab": 2, b"abb": 3})
    [(b'a', b'b'), (b'ab', b'b')]
    """
    merges: list[tuple[bytes, bytes]] = []
    for token in _by_rank(ranks):
        if len(token) == 1:
            continue
        rank = ranks[token]
        parts = _final_parts(token, ranks, rank)
        if len(parts) != 2:
            raise ValueError(
                f"token {token!r} (rank {rank}) is not one merge of lower-ranked tokens: "
                f"byte-pair merging ends on {len(parts)} parts {parts!r}"
            )
        merges.append((parts[0], parts[1]))
    return merges


def converter_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Every split of each token into two tokens, ordered by the token's rank, then the parts' ranks.

    This is the merge list HuggingFace's tiktoken converter writes into tokenizer.json
    (the parts may rank higher than the token they make).

    >>> converter_merges({b"a": 0, b"b": 1, b"ab": 2, b"bb": 3, b"abb": 4})
    [(b'a', b'b'), (b'b', b'b'), (b'a', b'bb'), (b'ab', b'b')]
    """
    # Only the splits into lengths that some token has are tried: every split of a token of L bytes
    # sliced and hashed 2L bytes a split, quadratic in L (a rank file with a token of 64 KB took
    # 7.6 s to load; a bug hunt). Ordinary tokens (up to ~128 bytes) have every length below theirs.
    lengths = sorted({len(token) for token in ranks})
    merges: list[tuple[bytes, bytes]] = []
    for token in _by_rank(ranks):
        size = len(token)
        found = []
        for i in lengths:
            if i >= size:
                break
            left = token[:i]
            if left in ranks:
                right = token[i:]
                if right in ranks:
                    found.append((ranks[left], ranks[right], left, right))
        found.sort()
        merges.extend((left, right) for _, _, left, right in found)
    return merges
