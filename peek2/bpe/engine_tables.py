"""Everything the merger builds from a ``TokenizerSpec``, as plain data: ``EngineTables``.

``peek2.formats.load_cache`` keeps these on disk, so that a second load of the same file skips
building them; ``peek2.tokenizer.Tokenizer`` builds its ``BytePairEncoder`` from them.
"""

from __future__ import annotations

from typing import NamedTuple

from peek2.bpe.merge_table import ID_BITS, PAIR_STRIDE, MergeTable, final_pairs
from peek2.bpe.vocab import pair_table, utf8_tokens
from peek2.bpe.whole_chars import WholeCharsLists, whole_chars
from peek2.formats.byte_level import to_bytes
from peek2.spec import TokenizerFormatError, TokenizerSpec


MAX_ID = (1 << ID_BITS) - 1
"""The largest token id the engine takes."""


def largest_spec_id(spec: TokenizerSpec, vocab_top: int | None = None) -> int:
    """The largest id of ``spec`` (-1 if none); TokenizerFormatError where it is above the engine's
    limit, before any table is made at its size (an id of 2**27 took 2 GB first; a bug hunt).
    ``vocab_top``: the largest id of its vocabulary, where known (a max over it takes 7 ms)."""
    if vocab_top is None:
        vocab_top = max(spec.vocab.values(), default=-1)
    top = max([vocab_top, *(t.id for t in spec.added_tokens), *spec.prefix_ids, *spec.suffix_ids, -1])
    if top > MAX_ID:
        raise TokenizerFormatError(f"{spec.source}: token id {top} is too large (at most {MAX_ID})")
    return top


def _byte_ids(spec: TokenizerSpec) -> list[int]:
    ids = []
    for byte in range(256):
        token_id = spec.vocab.get(bytes([byte]))
        if token_id is None and spec.byte_fallback:
            # tokenizers falls back on the UTF-8 bytes of the byte's character ("Ā" for 0x00:
            # <0xC4> <0x80>), two ids for one byte where it is not ASCII: not implemented (it gave
            # <0x00>, a silent difference; a bug hunt).
            raise NotImplementedError(
                f"{spec.source}: the vocabulary has no token for byte 0x{byte:02X}, which byte_fallback would encode as "
                "the UTF-8 bytes of its byte-level character: not implemented"
            )
        if token_id is None and spec.unk_token is not None:
            if spec.fuse_unk:  # (runs of unknown bytes fused into one id: not implemented; a bug hunt)
                raise NotImplementedError(f"{spec.source}: the vocabulary has no token for byte 0x{byte:02X}, and model.fuse_unk is true: not implemented")
            # (the token's bytes, as the vocabulary is keyed: its UTF-8 looked up another token
            # where it is not ASCII, "é" as "Ã©", and refused "Ġ"; a bug hunt)
            unk = to_bytes(spec.unk_token)
            token_id = spec.vocab.get(unk) if unk else None
            if token_id is None:
                raise NotImplementedError(
                    f"{spec.source}: the vocabulary has no token for byte 0x{byte:02X}, and model.unk_token "
                    f"{spec.unk_token!r} is not a byte-level token of the vocabulary: not implemented"
                )
        if token_id is None:
            # (tokenizers loads such a file and leaves the byte out of the ids, silently: a file it
            # reads, so not a format error, and an answer peek2 does not give; a bug hunt)
            raise NotImplementedError(
                f"{spec.source}: the vocabulary has no token for byte 0x{byte:02X} and no byte_fallback or unk_token: "
                "tokenizers leaves such a byte out of the ids without a word; not implemented"
            )
        ids.append(token_id)
    return ids


class EngineTables(NamedTuple):
    """What the engine builds from a spec, as plain data (``peek2.formats.load_cache`` keeps it on disk):
    the token of each byte, the merges as pair keys and values (``MergeTable``), the arguments of
    ``WholeChars``, the UTF-8 tokens by text, the tokens a piece may be looked up as without
    ``ignore_merges``; ``merge_table`` is the table itself when just built, and ``merge_pairs`` the
    merges as their tokens' ids in rank order (``peek2.spec.RankedMerges``), both never stored: the
    load cache keeps the pairs in the spec."""

    byte_ids: list[int]
    pair_keys: list[int]
    pair_values: list[int]
    whole_chars: WholeCharsLists
    text_vocab: dict[str, int]
    not_self_merging: list[int] | None  # tokens a piece is not looked up as (see ``final_pairs``; None: no lookup)
    merge_table: MergeTable | None = None
    merge_pairs: bytes = b""


def engine_tables(spec: TokenizerSpec) -> EngineTables:
    """The engine's tables of ``spec`` (errors name the merge that uses tokens not in the vocabulary)."""
    vocab = spec.vocab
    largest_spec_id(spec)
    pairs = pair_table(spec.merges, vocab, ID_BITS, PAIR_STRIDE)  # (compiled; None: name the merge below)
    for rank, (left, right) in enumerate(spec.merges if pairs is None else ()):
        left_id, right_id, merged_id = vocab.get(left), vocab.get(right), vocab.get(left + right)
        if left_id is None or right_id is None or merged_id is None:
            missing = [t for t, i in ((left, left_id), (right, right_id), (left + right, merged_id)) if i is None]
            raise TokenizerFormatError(f"{spec.source}: model.merges[{rank}] uses tokens not in the vocabulary: {missing}")
    assert pairs is not None  # (pair_table gives None only where a merge is missing a token)
    pair_keys, pair_values, merge_pairs = pairs
    byte_ids = _byte_ids(spec)
    # Without ignore_merges, a piece that is a token is that token only where its bytes merge into
    # it: final_pairs finds the others (None: no whole-token lookup, where it cannot).
    unmerged: list[int] | None = [] if spec.ignore_merges else None
    if len(set(byte_ids)) == 256:  # (final_pairs merges bytes as the engine does)
        census: list[int] | None = None if spec.ignore_merges else []
        # (The table of every merge is only merged with here: no filter, which the encoder's
        # lookups use: 20-25 ms of a load.)
        every = MergeTable(pair_keys, pair_values, filter_words=0)
        pair_keys, pair_values = final_pairs(every, pair_keys, pair_values, vocab, byte_ids, census)
        if census is not None:
            unmerged = census
    merges = MergeTable(pair_keys, pair_values)
    text_vocab = utf8_tokens(vocab)
    return EngineTables(byte_ids, pair_keys, pair_values, whole_chars(spec, merges, byte_ids, merge_pairs), text_vocab, unmerged, merges, merge_pairs)
